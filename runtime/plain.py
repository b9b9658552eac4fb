"""Plain data for the compile cache: a JSON text of a closed set of types,
so a record is read by parsing, never by running anything it names.

Encoded as themselves: None, bools, ints, strings.  Everything else is a
list whose first item is a tag:

    ["f", hex]                  float (by its bits: -0.0, nan and inf survive)
    ["c", hex, hex]             complex
    ["b", base64]               bytes
    ["t", items...] / ["l", items...]       tuple / list
    ["d", [key, value]...]      dict (keys of any encodable type, in order)
    ["s", start, stop, step]    slice
    ["E"]                       Ellipsis
    ["T", name]                 one of the types named in TYPES, or a numpy scalar type by dtype
    ["y", dtype]                numpy dtype (no object, no structured dtypes)
    ["g", dtype, base64]        numpy scalar
    ["a", dtype, shape, base64] numpy array (C order)
    ["F", path]                 a function, ufunc or method of numpy, by its
                                path from the numpy module ("linalg.norm",
                                "ndarray.sum"), looked up attribute by attribute
    ["D", class, {field: value}]  a dataclass among the classes the caller names
    ["N", module, qualname, [field...]]   a namedtuple class (a returned tree's), found among
                                the modules this process has imported (none is imported),
                                attribute by attribute, with those fields

A value of any other type raises Unencodable: the caller does not save it.
A record that does not decode raises Undecodable (never anything else)."""
from __future__ import annotations

import base64
import dataclasses
import json
import sys

import numpy as np

TYPES = {t.__name__: t for t in (tuple, list, dict, int, float, bool, str, bytes, complex, slice, type(None))}


class Unencodable(TypeError):
    """A value with no plain-data form."""


class Undecodable(ValueError):
    """Bytes that are not a record of this codec."""


def _dtype_text(dt: np.dtype) -> str:
    if dt.hasobject or dt.fields is not None or dt.subdtype is not None:
        raise Unencodable(f"dtype {dt} has no plain form")
    return dt.str


def _dtype(text) -> np.dtype:
    if not isinstance(text, str) or len(text) > 8:
        raise Undecodable(f"bad dtype {text!r}")
    dt = np.dtype(text)
    _dtype_text(dt)
    return dt


def _numpy_path(fn) -> str:
    """The path from numpy to `fn`, or Unencodable."""
    owner = getattr(fn, "__objclass__", None)
    module = getattr(owner if owner is not None else fn, "__module__", None) or ""
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__qualname__
    if module != "numpy" and not module.startswith("numpy."):
        raise Unencodable(f"the function {module}.{qualname} (only numpy's have a plain form)")
    path = ".".join(module.split(".")[1:] + [qualname])
    try:
        found = _resolve(path)
    except Undecodable:
        found = None
    if found is not fn:
        raise Unencodable(f"the function {module}.{qualname} (not reachable from numpy by that name)")
    return path


def _numpy_attr(path):
    """The numpy function at `path`: only one whose own path it is (so no
    other module's function is reached through a numpy module's imports)."""
    fn = _resolve(path)
    try:
        if _numpy_path(fn) == path:
            return fn
    except Unencodable:
        pass
    raise Undecodable(f"numpy.{path} is not numpy's function of that name")


def _resolve(path):
    x = np
    for part in str(path).split("."):
        if not part.isidentifier() or part.startswith("_"):
            raise Undecodable(f"bad numpy path {path!r}")
        try:
            x = getattr(x, part)
        except AttributeError:
            raise Undecodable(f"numpy has no {path}") from None
    if not callable(x) or isinstance(x, type):
        raise Undecodable(f"numpy.{path} is not a function")
    return x


def _namedtuple(module, qualname, fields):
    """The namedtuple class `qualname` of the imported module `module`,
    if its fields are `fields`."""
    x = sys.modules.get(module) if isinstance(module, str) else None
    for part in str(qualname).split("."):
        if x is None or not part.isidentifier():
            break
        x = vars(x).get(part) if hasattr(x, "__dict__") else None
    else:
        if isinstance(x, type) and issubclass(x, tuple) and getattr(x, "_fields", None) == tuple(fields or ()):
            return x
    raise Undecodable(f"no namedtuple {module}.{qualname} of those fields in this process")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def dumps(obj, classes=()) -> bytes:
    """The record of `obj`; `classes` are the dataclasses it may contain."""
    by_type = {c: c.__name__ for c in classes}

    def enc(x):
        t = type(x)
        if x is None or t in (bool, int, str):
            return x
        if t is float:
            return ["f", x.hex()]
        if t is complex:
            return ["c", x.real.hex(), x.imag.hex()]
        if t is bytes:
            return ["b", _b64(x)]
        if t is tuple or t is list:
            return ["t" if t is tuple else "l"] + [enc(v) for v in x]
        if t is dict:
            return ["d"] + [[enc(k), enc(v)] for k, v in x.items()]
        if t is slice:
            return ["s", enc(x.start), enc(x.stop), enc(x.step)]
        if x is Ellipsis:
            return ["E"]
        if t is type:
            if TYPES.get(x.__name__) is x:
                return ["T", x.__name__]
            if issubclass(x, np.generic):
                return ["T", "np:" + _dtype_text(np.dtype(x))]
            if issubclass(x, tuple) and isinstance(getattr(x, "_fields", None), tuple) and "<" not in x.__qualname__:
                return ["N", x.__module__, x.__qualname__, list(x._fields)]
            raise Unencodable(f"the type {x.__qualname__}")
        if isinstance(x, np.dtype):
            return ["y", _dtype_text(x)]
        if isinstance(x, np.generic):
            return ["g", _dtype_text(x.dtype), _b64(x.tobytes())]
        if t is np.ndarray:
            return ["a", _dtype_text(x.dtype), list(x.shape), _b64(np.ascontiguousarray(x).tobytes())]
        if callable(x) and not isinstance(x, type) and t not in by_type:
            return ["F", _numpy_path(x)]
        if t in by_type:
            return ["D", by_type[t], {f.name: enc(getattr(x, f.name)) for f in dataclasses.fields(x)}]
        raise Unencodable(f"a value of type {t.__qualname__}")

    return json.dumps(enc(obj), separators=(",", ":")).encode()


def loads(blob: bytes, classes=()):
    """The object of a record dumps() made with the same `classes`."""
    by_name = {c.__name__: c for c in classes}

    def dec(x):
        if x is None or type(x) in (bool, int, str):
            return x
        if type(x) is not list or not x or type(x[0]) is not str:
            raise Undecodable(f"malformed item {str(x)[:40]}")
        tag, rest = x[0], x[1:]
        if tag == "f":
            return float.fromhex(rest[0])
        if tag == "c":
            return complex(float.fromhex(rest[0]), float.fromhex(rest[1]))
        if tag == "b":
            return base64.b64decode(rest[0], validate=True)
        if tag == "t":
            return tuple(dec(v) for v in rest)
        if tag == "l":
            return [dec(v) for v in rest]
        if tag == "d":
            return {dec(k): dec(v) for k, v in rest}
        if tag == "s":
            return slice(*(dec(v) for v in rest))
        if tag == "E":
            return Ellipsis
        if tag == "T":
            name = rest[0]
            if name.startswith("np:"):
                return _dtype(name[3:]).type
            return TYPES[name]
        if tag == "N":
            return _namedtuple(*rest)
        if tag == "y":
            return _dtype(rest[0])
        if tag == "g":
            dt = _dtype(rest[0])
            data = base64.b64decode(rest[1], validate=True)
            if len(data) != dt.itemsize:
                raise Undecodable("scalar of the wrong size")
            return np.frombuffer(data, dt)[0]
        if tag == "a":
            dt, shape = _dtype(rest[0]), tuple(rest[1])
            if not all(type(n) is int and n >= 0 for n in shape):
                raise Undecodable("bad array shape")
            data = base64.b64decode(rest[2], validate=True)
            if len(data) != dt.itemsize * int(np.prod(shape, dtype=np.int64)):
                raise Undecodable("array data of the wrong size")
            return np.frombuffer(data, dt).reshape(shape).copy()
        if tag == "F":
            return _numpy_attr(rest[0])
        if tag == "D":
            cls, fields = by_name[rest[0]], rest[1]
            names = {f.name for f in dataclasses.fields(cls)}
            if set(fields) != names:
                raise Undecodable(f"fields of {rest[0]} do not match")
            return cls(**{k: dec(v) for k, v in fields.items()})
        raise Undecodable(f"unknown tag {tag!r}")

    try:
        return dec(json.loads(blob))
    except Undecodable:
        raise
    except (ValueError, TypeError, KeyError, IndexError, RecursionError, OverflowError) as e:
        raise Undecodable(f"{type(e).__name__}: {e}") from None

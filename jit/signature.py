"""Specialization keys.  Per array: dtype, rank, which dims are 0 or 1 (or
the whole shape with dynamic=False) and the layout class (C-contiguous or
strided); Python floats and complex numbers are runtime scalars; ints that
have changed are symbols (automatic dynamic); everything else is static and
keyed by value."""
from __future__ import annotations

from collections.abc import Iterator as _Iterator
from dataclasses import dataclass

import numpy as np

from jit.held import RANDOM_STATES, holder_type
from jit.trace import InputSpec
from shapes.env import SYMBOLIC_FROM

_ndarray = np.ndarray
_generic = np.generic


class IntDim:
    """A dynamic int argument seen as a 1-D "shape": the guards bind its
    symbol from `shape[0]` as they bind array dims."""
    __slots__ = ("shape",)

    def __init__(self, value: int):
        self.shape = (value,)


_INT64 = 2 ** 63


class NumberList:
    """A list argument traced as data (jit/tracer.py DataList): its numbers
    as a 1-D array, a leaf of the call's tree."""
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array


def number_array(x) -> np.ndarray | None:
    """A list of Python floats, or of Python ints that fit int64, as the
    array np.asarray makes of it; None for anything else."""
    if type(x) is not list or not x:
        return None
    t = type(x[0])
    if t is not float and t is not int:
        return None
    for v in x:
        if type(v) is not t:
            return None
    try:
        return np.array(x, np.float64 if t is float else np.int64)
    except OverflowError:
        return None


def with_data_lists(bound: tuple, data_args) -> tuple:
    """`bound` with each argument of `data_args` that is a list of numbers
    made a NumberList leaf."""
    out = list(bound)
    for k in data_args:
        a = number_array(out[k])
        if a is not None:
            out[k] = NumberList(a)
    return tuple(out)


_ITERATOR = "an iterator"
_OBJECT = "an object"


_SHAPE_KEYS: dict = {}  # shape -> its key: each dim of SYMBOLIC_FROM or more a -1 (classify_call's, memoized)


def _shape_key(shape: tuple) -> tuple:
    key = tuple([d if d < SYMBOLIC_FROM else -1 for d in shape])
    if len(_SHAPE_KEYS) >= 4096:  # (a service's many shapes: kept bounded)
        _SHAPE_KEYS.clear()
    _SHAPE_KEYS[shape] = key
    return key


def classify_call(leaves, treedef, dynamic, dyn_ints=frozenset()):
    """-> (key, arrays, runtime inputs).  The hot path: keep it lean.
    `dyn_ints`: leaf indices of int arguments that are symbols, not keys."""
    key = [treedef]
    arrays = []
    runtime = []
    for k, x in enumerate(leaves):
        t = type(x)
        if t is int and k in dyn_ints and -_INT64 <= x < _INT64:
            arrays.append(IntDim(x))
            key.append(int)
            continue
        if t is _ndarray:
            arrays.append(x)
            runtime.append(x)
            if dynamic is False:
                key.append((x.dtype, x.shape, x.flags.c_contiguous))
            else:
                shape = _SHAPE_KEYS.get(x.shape)
                if shape is None:
                    shape = _shape_key(x.shape)
                key.append((x.dtype, shape, x.flags.c_contiguous))
        elif t is float or t is complex:
            runtime.append(x)
            key.append(t)
        elif t is NumberList:
            x = x.array
            arrays.append(x)
            runtime.append(x)
            key.append(("list", x.dtype, x.shape if dynamic is False else
                        tuple([d if d < SYMBOLIC_FROM else -1 for d in x.shape])))
        elif isinstance(x, _ndarray):  # a subclass: a memmap computes as its base class, another runs in numpy
            x = np.asarray(x)
            arrays.append(x)
            runtime.append(x)
            key.append((t, x.dtype, x.shape if dynamic is False else
                        tuple([d if d < SYMBOLIC_FROM else -1 for d in x.shape]), x.flags.c_contiguous))
        elif isinstance(x, _generic):
            runtime.append(x)
            key.append(x.dtype)
        elif holder_type(t):  # (an object of the user's: what traces read of it is keyed at its paths, jit/held.py;
            # by identity, each new instance traced again and was kept for good), and which leaf before is the
            same = -1  # same object (`a is b`)
            for j in range(k):
                if leaves[j] is x:
                    same = j
                    break
            key.append((t, _OBJECT, same))
        elif isinstance(x, _Iterator):  # (one key for all: each runs in numpy, Signature.of)
            key.append((t, _ITERATOR))
        else:
            try:
                hash(x)
                key.append((t, x))
            except TypeError:
                key.append((t, "unhashable"))
    return tuple(key), arrays, runtime


@dataclass
class Signature:
    specs: list[InputSpec]
    text: list[str]
    unsupported: str | None

    @staticmethod
    def of(leaves, key, paths, dynamic) -> "Signature":
        """The inputs of a call as classify_call keyed them (`key`: its key,
        one entry per leaf after the tree's), described, and the first reason
        one of them cannot be traced."""
        specs, text, bad = [], [], None
        for x, path, kind in zip(leaves, paths, key[1:]):
            if kind is int:  # (a dynamic int)
                specs.append(InputSpec("int", path))
                text.append(f"{path}: int")
            elif type(kind) is tuple and kind[0] == "list":
                specs.append(InputSpec("list", path))
                dims = "*" if x.array.size >= SYMBOLIC_FROM and dynamic is not False else x.array.size
                text.append(f"{path}: list of {'float' if x.array.dtype.kind == 'f' else 'int'}[{dims}]")
            elif type(kind) is tuple and (isinstance(kind[0], np.dtype)
                                          or isinstance(kind[0], type) and issubclass(kind[0], _ndarray)):
                if type(x) not in (_ndarray, np.memmap) and bad is None:
                    bad = (f"argument {path} is a {type(x).__module__}.{type(x).__name__} (an ndarray subclass: "
                           f"its own methods and result type are numpy's)")
                x = np.asarray(x)
                if x.dtype.kind in "OSUVMm" and bad is None:
                    bad = f"argument {path} has unsupported dtype {x.dtype}"
                specs.append(InputSpec("array", path))
                dims = ", ".join(str(d) if (d < SYMBOLIC_FROM or dynamic is False) else "*" for d in x.shape)
                lay = "C" if x.flags.c_contiguous else "strided"
                text.append(f"{path}: {x.dtype}[{dims}] {lay}")
            elif kind is float or kind is complex or isinstance(kind, np.dtype):
                specs.append(InputSpec("scalar", path))
                text.append(f"{path}: {kind.__name__ if kind is float or kind is complex else x.dtype} scalar")
            else:  # (static: keyed by value)
                if isinstance(x, RANDOM_STATES):
                    bad = bad or (f"argument {path} is a numpy random generator (its draws would be frozen into "
                                  "the trace)")
                elif type(x) is int and not -_INT64 <= x < _INT64:
                    bad = bad or f"argument {path} is an int beyond int64 (numpy decides what it becomes)"
                elif kind == (type(x), _ITERATOR):
                    bad = bad or (f"argument {path} is an iterator (a {type(x).__name__}): a trace would use it "
                                  "up, and numpy's run would find it empty")
                elif bad is None and not holder_type(type(x)):  # (an object of the user's is keyed by its class and
                    try:  # what the trace reads of it: a dataclass, whose __hash__ is None, too)
                        hash(x)
                    except TypeError:
                        bad = (f"argument {path} is an unhashable {type(x).__name__}; static arguments "
                               f"must be hashable (pass arrays, floats, or hashable values)")
                specs.append(InputSpec("static", path))
                text.append(f"{path}={x!r}")
        return Signature(specs, text, bad)

    def describe(self) -> str:
        return "(" + ", ".join(self.text) + ")"

"""The graph IR: immutable values and nodes in SSA form, and its one printed form."""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Dim = "int | sympy.Expr"

_SHORT = {
    "float16": "f16", "float32": "f32", "float64": "f64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "bool": "b1", "complex64": "c64", "complex128": "c128",
}


def dtype_name(dt: np.dtype) -> str:
    return _SHORT.get(np.dtype(dt).name, np.dtype(dt).name)


@dataclass(frozen=True, slots=True)
class Value:
    """One SSA value: an array (or a weak Python scalar when `weak`)."""

    id: int
    dtype: np.dtype
    shape: tuple  # ints and sympy expressions over dim symbols
    weak: bool = False  # a Python scalar: weakly typed under NEP 50

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __reduce__(self):  # (pickled positionally: the dataclass default looks up its fields per object)
        return Value, (self.id, self.dtype, self.shape, self.weak)

    def type_str(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        weak = "weak " if self.weak else ""
        return f"{weak}{dtype_name(self.dtype)}[{dims}]"


class ArrayConst:
    """A numpy array captured by the traced function (a weight, a table).

    Compared by identity: the same object is the same constant.  Its current
    contents are read at run time, exactly as eager numpy would."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array

    def __eq__(self, other):
        return isinstance(other, ArrayConst) and other.array is self.array

    def __hash__(self):
        return id(self.array)

    def __repr__(self):
        a = self.array
        return f"array<{dtype_name(a.dtype)}{list(a.shape)}@{id(a) & 0xffff:04x}>"


@dataclass(frozen=True, slots=True)
class Node:
    """`outputs = op(*inputs, **attrs)`.  attrs is a sorted tuple of pairs so
    that nodes hash and compare structurally (CSE for free)."""

    op: str
    inputs: tuple[Value, ...]
    attrs: tuple[tuple[str, Any], ...]
    outputs: tuple[Value, ...]
    loc: str = field(default="", compare=False)

    def __reduce__(self):
        return Node, (self.op, self.inputs, self.attrs, self.outputs, self.loc)

    def attr(self, name: str, default=None):
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def out(self) -> Value:
        return self.outputs[0]


def make_attrs(**kw) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(kw.items()))


@dataclass(frozen=True)
class Graph:
    inputs: tuple[Value, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[Value, ...]

    def __repr__(self) -> str:
        return format_graph(self)

    def producers(self) -> dict[int, Node]:
        return {v.id: n for n in self.nodes for v in n.outputs}

    def users(self) -> dict[int, list[Node]]:
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                out.setdefault(v.id, []).append(n)
        return out


# ---------------------------------------------------------------- printer

def _fmt_attr(v) -> str:
    if isinstance(v, np.dtype) or isinstance(v, type) and issubclass(v, np.generic):
        return dtype_name(np.dtype(v))
    if isinstance(v, tuple):
        return "(" + ", ".join(_fmt_attr(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, np.ufunc)):
        mod = getattr(v, "__module__", "") or ""
        return f"{mod.split('.')[0]}.{v.__name__}" if mod else v.__name__
    return str(v)


def format_node(n: Node, names: dict[int, str]) -> str:
    lhs = ", ".join(f"{names[o.id]}: {o.type_str()}" for o in n.outputs)
    args = ", ".join(names[v.id] for v in n.inputs)
    attrs = ", ".join(f"{k}={_fmt_attr(v)}" for k, v in n.attrs)
    rhs = n.op + (" " + args if args else "") + (" {" + attrs + "}" if attrs else "")
    return f"{lhs} = {rhs}"


def value_names(g: Graph) -> dict[int, str]:
    """Canonical names: numbered in order of definition, whatever the ids."""
    names: dict[int, str] = {}
    for v in g.inputs:
        names[v.id] = f"%{len(names)}"
    for n in g.nodes:
        for o in n.outputs:
            names[o.id] = f"%{len(names)}"
    return names


def format_graph(g: Graph) -> str:
    names = value_names(g)
    lines = ["graph(" + ", ".join(f"{names[v.id]}: {v.type_str()}" for v in g.inputs) + ") {"]
    lines += ["  " + format_node(n, names) for n in g.nodes]
    lines.append("  return " + ", ".join(names[v.id] for v in g.outputs))
    lines.append("}")
    return "\n".join(lines)


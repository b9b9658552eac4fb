"""The `loop` node's body (clustering/reroll.py makes it, codegen/loops.py
compiles it) and the loop's numpy reference: a Python loop that tracing
unrolled, as the first trip's nodes and how each integer in them moves per
trip."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy


@dataclass(frozen=True, eq=False)
class LoopBody:
    """A re-rolled loop: `nodes` are the first trip's (their values are that
    trip's), `refs[q][j]` says where input j of node q comes from in every
    trip: ("in", k) the loop's input k, ("local", q2) node q2's output in the
    same trip, ("carry", k, q2) the loop's input k in the first trip and node
    q2's output of the trip before in the others.  `steps[q]` is how much each
    integer of node q (in ints_of order) moves per trip.  The loop's first input
    is the array it updates (its output: that array after the last trip)."""

    nodes: tuple
    refs: tuple
    steps: tuple
    trips: int
    result: int      # the body node whose output of the last trip is the loop's output

    def __repr__(self) -> str:  # (the graph printer shows attrs)
        ops = " ".join(n.op for n in self.nodes)
        return f"<{self.trips} trips of: {ops}>"

    def attrs_at(self, q: int, trip, add=None, mul=None) -> tuple[tuple, tuple]:
        """(attrs, output shape) of node q in `trip`: its integers (and the
        integer terms of its symbolic sizes) moved by trip * step.  With
        `add`/`mul` (codegen: `trip` an IR value) a moved integer is
        add(int, mul(step, trip)) and a moved size add(rest, that): `rest` its
        symbolic part; else sympy builds them."""
        n = self.nodes[q]
        moved = []
        for x, s in zip(ints_of((n.attrs, n.out.shape)), self.steps[q]):
            if s == 0:
                moved.append(None)
            elif add is None:
                moved.append(x + s * trip)
            else:
                moved.append(add(x, mul(s, trip)))
        join = (lambda rest, v: rest + v) if add is None else add
        return _put_ints((n.attrs, n.out.shape), iter(moved), join)


def run_loop(*xs, body: LoopBody):
    """The `loop` op's numpy reference: the trips, node by node."""
    from shapes.ops import OPS as ops  # (the registry is complete by the time a loop runs)
    prev: dict[int, object] = {}
    for t in range(body.trips):
        cur: dict[int, object] = {}
        for q, n in enumerate(body.nodes):
            args = []
            for r in body.refs[q]:
                if r[0] == "in":
                    args.append(xs[r[1]])
                elif r[0] == "local":
                    args.append(cur[r[1]])
                else:
                    args.append(xs[r[1]] if t == 0 else prev[r[2]])
            attrs, _ = body.attrs_at(q, t)
            cur[q] = ops[n.op].ref(*args, **dict(attrs))
        prev = cur
    return np.asarray(prev[body.result]) if body.trips else xs[0]


# ------------------------------------------------------------- integers

def ints_of(x) -> list[int]:
    """The integers in nested tuples, depth first: ints (bools are not),
    sympy integers, and the integer term of a symbolic size (-5 of s1 - 5,
    0 of s1), so that sizes moving with a loop's trips move as ints do."""
    out: list[int] = []

    def walk(y):
        if type(y) is tuple:
            for z in y:
                walk(z)
        elif type(y) is int:
            out.append(y)
        elif isinstance(y, sympy.Basic):
            c = y.as_coeff_Add()[0] if not y.is_Integer else y
            if c.is_Integer:
                out.append(int(c))
    walk(x)
    return out


def symbolic_rest(y):
    """A symbolic size without its integer term (ints_of's split), or None
    when it has none to split (ints, sympy integers, rational terms)."""
    if not isinstance(y, sympy.Basic) or y.is_Integer:
        return None
    c, rest = y.as_coeff_Add()
    return rest if c.is_Integer else None


def _put_ints(x, it, join):
    """x with the integers ints_of finds replaced by those of `it` (None:
    unchanged); a symbolic size's by join(its rest, the new integer)."""
    if type(x) is tuple:
        return tuple(_put_ints(y, it, join) for y in x)
    if type(x) is int or isinstance(x, sympy.Integer):
        v = next(it)
        return x if v is None else v
    rest = symbolic_rest(x)
    if rest is not None:
        v = next(it)
        return x if v is None else join(rest, v)
    return x

"""The `loop` node's body (clustering/reroll.py makes it, codegen/loops.py
compiles it, shapes/ops.py run_loop is its numpy reference): a Python loop
that tracing unrolled, as the first trip's nodes and how each integer in
them moves per trip."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import sympy


@dataclass(frozen=True, eq=False)
class LoopBody:
    """A re-rolled loop: `nodes` are the first trip's (their values are that
    trip's), `refs[q][j]` says where input j of node q comes from in every
    trip: ("in", k) the loop's input k, ("local", q2) node q2's output in the
    same trip, ("carry", k, q2) the loop's input k in the first trip and node
    q2's output of the trip before in the others.  `steps[q]` is how much each
    integer of node q (in ints_of order) moves per trip; a node may be a
    loop itself, whose integers (its trips, its nodes') move with this one's.  The loop's first input
    is the array it updates (its output: that array after the last trip)."""

    nodes: tuple
    refs: tuple
    steps: tuple
    trips: int
    result: int      # the body node whose output of the last trip is the loop's output

    @functools.cached_property
    def ints(self) -> tuple:
        """ints_of this body (its trips, then its nodes' attrs and shapes),
        once: re-rolling asks for a node's integers at every trip it tries."""
        out: list[int] = []
        _add_ints((self.trips, tuple((n.attrs, n.out.shape) for n in self.nodes)), out)
        return tuple(out)

    def __repr__(self) -> str:  # (the graph printer shows attrs)
        ops = " ".join(n.op for n in self.nodes)
        return f"<{self.trips} trips of: {ops}>"

    def moved_ints(self, q: int, trip, add=None, mul=None, base=None) -> list:
        """Node q's integers (ints_of order: the integer terms of symbolic
        sizes too) in `trip`, each moved by trip * step from its first
        trip's value, or from base's (a nested loop: its values in the outer
        loop's trip).  With `add`/`mul` (codegen: `trip` an IR value) a moved
        integer is add(int, mul(step, trip)); else sympy builds it."""
        n = self.nodes[q]
        out = []
        for x, s in zip(ints_of((n.attrs, n.out.shape)) if base is None else base, self.steps[q]):
            out.append(x if s == 0 else x + s * trip if add is None else add(x, mul(s, trip)))
        return out

    def attrs_at(self, q: int, trip, add=None, mul=None, base=None) -> tuple[tuple, tuple]:
        """(attrs, output shape) of node q in `trip` (moved_ints's values; a
        moved size is add(rest, its integer term): `rest` its symbolic part).
        A nested loop's body is left as it is: moved_ints gives its integers."""
        n = self.nodes[q]
        moved = self.moved_ints(q, trip, add, mul, base)
        if base is None:  # (unmoved: as they are)
            moved = [None if s == 0 else x for x, s in zip(moved, self.steps[q])]
        join = (lambda rest, v: rest + v) if add is None else add
        return _put_ints((n.attrs, n.out.shape), iter(moved), join)

    def split(self, ints) -> tuple[object, list]:
        """(trips, each node's integers) of this body as a nested loop, from
        the loop node's integers (ints_of order: the trips, then the nodes')."""
        it = iter(ints)
        trips = next(it)
        return trips, [[next(it) for _ in ints_of((n.attrs, n.out.shape))] for n in self.nodes]

    def in_any_trip(self, q: int) -> tuple[dict, tuple]:
        """(attrs, output shape) of node q in trip TRIP (a sympy symbol): what
        holds for these holds in every trip."""
        attrs, shape = self.attrs_at(q, TRIP)
        return dict(attrs), shape

    def broadcast(self, q_in: int, q: int) -> bool:
        """Whether node q_in's 1-D output reaches node q's elementwise math as
        one element repeated (its length is 1 while q's is not, in some trip)."""
        (n_in,), (n,) = self.in_any_trip(q_in)[1], self.in_any_trip(q)[1]
        return n_in == 1 and n != 1


TRIP = sympy.Symbol("_trip", integer=True, nonnegative=True)  # (dim names never begin with _)


# ------------------------------------------------------------- integers

def leaves(x):
    """The leaves of nested tuples, depth first; a nested loop's body is its
    trips, then each of its nodes' (attrs, output shape)."""
    if type(x) is tuple:
        for y in x:
            yield from leaves(y)
    elif type(x) is LoopBody:
        yield x.trips
        for n in x.nodes:
            yield from leaves((n.attrs, n.out.shape))
    else:
        yield x


def ints_of(x) -> list[int]:
    """The integers in x (leaves order): ints (bools are not), sympy
    integers, and the integer term of a symbolic size (-5 of s1 - 5, 0 of
    s1), so that sizes moving with a loop's trips move as ints do."""
    out: list[int] = []
    _add_ints(x, out)
    return out


def _add_ints(x, out: list) -> None:
    if type(x) is tuple:
        for y in x:
            _add_ints(y, out)
    elif type(x) is LoopBody:
        out += x.ints
    elif type(x) is int:
        out.append(x)
    elif isinstance(x, sympy.Basic):
        c = x.as_coeff_Add()[0] if not x.is_Integer else x
        if c.is_Integer:
            out.append(int(c))


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
    if type(x) is LoopBody:  # (its integers are the loop node's: moved_ints and split give them)
        for _ in ints_of(x):
            next(it)
        return x
    if type(x) is int or isinstance(x, sympy.Integer):
        v = next(it)
        return x if v is None else v
    rest = symbolic_rest(x)
    if rest is not None:
        v = next(it)
        return x if v is None else join(rest, v)
    return x

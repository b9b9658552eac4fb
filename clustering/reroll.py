"""Re-rolling: a Python loop that tracing unrolled becomes one `loop` node.

Tracing runs the user's Python loops, so `for j in range(n): A[i, j] = ...`
leaves n copies of the same few nodes in the graph, each with its own
integer constants; run one by one in numpy, each copy pays numpy's per-call
overhead on a single element.  This pass finds runs of nodes that repeat
with a fixed period, checks that every copy is the first one with each
integer constant moved by a fixed step per trip (constants affine in the trip
number), that values flow only inside a trip or into it from before the run
(and the one array the trips update from the trip before), and replaces the
run by a `loop` node: the first trip's nodes, how each constant moves, and
the trip count.  codegen/loops.py compiles it to one native loop.

The loop's body is what that native loop computes: scalars and 1-D vectors
of basic indexing of arrays read by the loop (and of vectors), elementwise
math on them, dot products and sums, maxima and minima of vectors, and
scalar stores into the one array the loop updates (in place: every read of a version of that array
comes before the store that makes the next one).  Anything else stays
unrolled, exactly as traced.
"""
from __future__ import annotations

import numpy as np
import sympy

from shapes.ir import Graph, Node, make_attrs
from shapes.loop import LoopBody, ints_of, symbolic_rest
from shapes.ops import OPS

MAX_PERIOD = 48     # nodes in one trip of a loop this pass looks for
MIN_TRIPS = 3       # trips a run needs to become a loop
LOOP_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.bool_)}
VECTOR_REDUCTIONS = ("sum", "max", "min")


def _abstract(x):
    """x with its integers (ints_of's) blanked: nodes that differ only in them match."""
    if type(x) is tuple:
        return tuple(_abstract(y) for y in x)
    if type(x) is int or isinstance(x, sympy.Integer):
        return None
    rest = symbolic_rest(x)
    return x if rest is None else ("+int", rest)


def _key(n: Node):
    k = (n.op, _abstract(n.attrs), tuple((o.dtype, o.ndim, o.weak) for o in n.outputs), len(n.inputs))
    try:
        hash(k)
    except TypeError:
        return object()
    return k


# ------------------------------------------------------------------ pass

def reroll(g: Graph) -> Graph:
    """g with the runs that repeat (and that a native loop computes) as `loop` nodes."""
    nodes = list(g.nodes)
    if len(nodes) < MIN_TRIPS * 2:
        return g
    ids: dict = {}
    keys = np.array([ids.setdefault(_key(n), len(ids)) for n in nodes], dtype=np.int64)
    if len(ids) == len(nodes):
        return g
    taken = np.zeros(len(nodes), dtype=bool)
    loops: dict[int, tuple[int, Node]] = {}  # start -> (end, loop node)
    users = _users(g)
    producers = g.producers()
    is_set = np.array([n.op == "setitem" for n in nodes])
    for p in range(1, min(MAX_PERIOD, len(nodes) // MIN_TRIPS) + 1):
        same = keys[:-p] == keys[p:]
        for a, b in _runs(same, p * (MIN_TRIPS - 1)):
            end = b + p  # nodes [a, end) repeat with period p; those no loop took yet:
            free = np.flatnonzero(~taken[a:end])
            if len(free) < MIN_TRIPS * p:
                continue
            a = a + int(free[0])
            held = np.flatnonzero(taken[a:end])
            end = a + int(held[0]) if len(held) else end
            if end - a < MIN_TRIPS * p:
                continue
            sets = [s for s in range(a, a + p) if is_set[s]]
            for start in sorted({a + (s + 1 - a) % p for s in sets}):
                trips = (end - start) // p
                if trips < MIN_TRIPS or taken[start:start + trips * p].any():
                    continue
                node = _loop(nodes, start, p, trips, users, producers)
                if node is not None:
                    taken[start:start + trips * p] = True
                    loops[start] = (start + trips * p, node)
                    break
    if not loops:
        return g
    out, k = [], 0
    while k < len(nodes):
        if k in loops:
            end, node = loops[k]
            out.append(node)
            k = end
        else:
            out.append(nodes[k])
            k += 1
    return Graph(g.inputs, tuple(out), g.outputs)


def _runs(same: np.ndarray, min_len: int):
    """[a, b) of each run of True in `same` at least min_len long."""
    if not same.any():
        return []
    d = np.diff(np.concatenate(([0], same.view(np.int8), [0])))
    starts, stops = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    keep = stops - starts >= min_len
    return list(zip(starts[keep].tolist(), stops[keep].tolist()))


def _users(g: Graph) -> dict[int, list[int]]:
    """value id -> positions of the nodes reading it (len(nodes) for a graph output)."""
    out: dict[int, list[int]] = {}
    for k, n in enumerate(g.nodes):
        for v in n.inputs:
            out.setdefault(v.id, []).append(k)
    for v in g.outputs:
        out.setdefault(v.id, []).append(len(g.nodes))
    return out


def _loop(nodes, start: int, p: int, trips: int, users, producers) -> Node | None:
    """The loop node of nodes[start:start + trips * p] when they are `trips`
    trips of one body with affine integers that a native loop computes, else None."""
    end = start + trips * p
    at: dict[int, tuple[int, int]] = {}
    for k in range(start, end):
        for o in nodes[k].outputs:
            at[o.id] = divmod(k - start, p)
    body = nodes[start:start + p]
    if any(len(n.outputs) != 1 for n in body):
        return None
    refs: list[list] = [[None] * len(n.inputs) for n in body]
    base = [ints_of((n.attrs, n.out.shape)) for n in body]
    steps: list[list[int]] = [[0] * len(b) for b in base]
    ins: list = []  # the loop's inputs (values from before the run)

    def input_index(v) -> int:
        for k, u in enumerate(ins):
            if u.id == v.id:
                return k
        ins.append(v)
        return len(ins) - 1

    for t in range(trips):
        for q in range(p):
            n = nodes[start + t * p + q]
            if t:
                xs = ints_of((n.attrs, n.out.shape))
                if len(xs) != len(base[q]):
                    return None
                for j, (x0, x) in enumerate(zip(base[q], xs)):
                    if t == 1:
                        steps[q][j] = x - x0
                    elif x != x0 + t * steps[q][j]:
                        return None
                if _abstract(n.out.shape) != _abstract(body[q].out.shape):
                    return None
            for j, v in enumerate(n.inputs):
                src = at.get(v.id)
                if src is None:
                    r = ("in", input_index(v))
                elif src[0] == t:
                    r = ("local", src[1])
                elif src[0] == t - 1:
                    r = ("prev", src[1])
                else:
                    return None
                have = refs[q][j]
                if have is None:
                    refs[q][j] = r
                elif have == r:
                    pass
                elif have[0] == "in" and r[0] == "prev" and t == 1:
                    refs[q][j] = ("carry", have[1], r[1])
                elif have[0] == "carry" and r == ("prev", have[2]):
                    pass
                else:
                    return None
    if any(r[0] == "prev" for rs in refs for r in rs):
        return None
    # what leaves the run: the last trip's values only, and only the updated array
    outs = set()
    for k in range(start, end):
        for o in nodes[k].outputs:
            if any(u >= end for u in users.get(o.id, ())):
                t, q = divmod(k - start, p)
                if t != trips - 1:
                    return None
                outs.add(q)
    carries = {r for rs in refs for r in rs if r[0] == "carry"}
    if len(carries) != 1:
        return None
    (_, k_in, q_last), = carries
    if outs - {q_last}:
        return None
    if k_in != 0:  # (the updated array is the loop's first input)
        order = [k_in] + [k for k in range(len(ins)) if k != k_in]
        new = {old: k for k, old in enumerate(order)}
        ins = [ins[k] for k in order]
        refs = [[(r[0], new[r[1]]) + r[2:] if r[0] in ("in", "carry") else r for r in rs] for rs in refs]
    lb = LoopBody(tuple(body), tuple(tuple(rs) for rs in refs), tuple(tuple(s) for s in steps), trips, q_last)
    if not _computable(lb, ins, producers):
        return None
    final = nodes[start + (trips - 1) * p + q_last].out
    return Node("loop", tuple(ins), make_attrs(body=lb), (final,), body[0].loc)


# ------------------------------------------------------ what a loop computes

def _computable(lb: LoopBody, ins, producers) -> bool:
    """Whether codegen/loops.py computes this body: see the module docstring."""
    target = ins[0]
    if target.ndim == 0 or target.dtype not in LOOP_DTYPES:
        return False
    for v in ins[1:]:  # (a scalar from outside: a constant, a dim, or a float passed as a double)
        p = producers.get(v.id)
        folded = p is not None and (p.op == "dim" or p.op == "const" and is_scalar_const(p.attr("value")))
        if v.dtype not in LOOP_DTYPES or v.ndim == 0 and not (folded or v.dtype.kind == "f"):
            return False
    nodes = lb.nodes
    # where each vector is computed: it is evaluated lazily by the node that consumes it
    evaluated: dict[int, int] = {}
    for q in range(len(nodes) - 1, -1, -1):
        lazy = nodes[q].out.ndim == 1 and nodes[q].op not in VECTOR_REDUCTIONS + ("matmul", "setitem")
        for r in lb.refs[q]:
            if r[0] == "local" and nodes[r[1]].out.ndim == 1:
                at = evaluated.get(q, q) if lazy else q
                evaluated[r[1]] = max(evaluated.get(r[1], -1), at)
    current = ("carry",)             # the version of the updated array that is current
    superseded: dict[tuple, int] = {}  # version -> the store that makes the next one
    reads: list[tuple] = []          # (version, where it is read)
    for q, n in enumerate(nodes):
        refs = lb.refs[q]
        if any(r[0] == "in" and r[1] == 0 for r in refs):
            return False  # (the updated array as it was before the loop)
        versions = [_version_of(r, lb) for r in refs]
        if n.op == "setitem":
            items = n.attr("items")
            if (versions[0] != current or len(n.inputs) != 2 or versions[1] is not None or n.inputs[1].ndim
                    or len(items) != n.out.ndim or not all(it[0] == "int" for it in items)
                    or n.inputs[1].dtype != n.out.dtype and not _casts(n.inputs[1].dtype, n.out.dtype)):
                return False
            superseded[current] = q
            current = ("local", q)
            continue
        if n.out.ndim > 1 or n.out.dtype not in LOOP_DTYPES:
            return False
        if n.op == "getitem":
            if not _basic(n.attr("items")) or refs[0][0] == "local" and versions[0] is None and (
                    nodes[refs[0][1]].out.ndim != 1):
                return False
            if versions[0] is not None:
                reads.append((versions[0], evaluated.get(q, q)))
            continue
        if any(v is not None for v in versions) or any(
                r[0] == "in" and v.ndim for r, v in zip(refs, n.inputs)):
            return False  # (arrays are read through basic indexing only)
        if n.op == "matmul":
            a, b = n.inputs
            if not (a.ndim == b.ndim == 1 and a.dtype == b.dtype == n.out.dtype and n.out.dtype.kind == "f"):
                return False
        elif n.op in VECTOR_REDUCTIONS:
            x = n.inputs[0]
            if (x.ndim != 1 or x.dtype != n.out.dtype or x.dtype == np.bool_ or n.attr("dtype") is not None
                    or n.attr("axis") not in (None, 0, (0,), -1, (-1,))):
                return False
        elif n.op == "const":
            if not is_scalar_const(n.attr("value")):
                return False
        else:
            fact = OPS.get(n.op)
            if fact is None or fact.category != "elementwise" or not fact.kernel or n.op == "power":
                return False
            kind = "b" if n.out.dtype == np.bool_ else "f" if n.out.dtype.kind == "f" else "i"
            if kind not in fact.kernel or any(v.ndim > 1 or v.dtype not in LOOP_DTYPES for v in n.inputs):
                return False
            if n.op == "astype" and n.out.dtype.kind != "f" and n.inputs[0].dtype.kind == "f":
                return False  # (float to int is not compiled)
    if not superseded or current != ("local", lb.result):
        return False
    return all(version not in superseded or where < superseded[version] for version, where in reads)


def _version_of(r, lb: LoopBody):
    """The version of the updated array a ref names, or None when it is not one."""
    if r[0] == "carry":
        return ("carry",)
    if r[0] == "local" and lb.nodes[r[1]].op == "setitem":
        return ("local", r[1])
    return None


def is_scalar_const(c) -> bool:
    """A constant codegen emits inline: a Python or numpy bool, int or float."""
    return isinstance(c, (int, float, bool, np.bool_, np.integer, np.floating))


def _basic(items) -> bool:
    return all(it[0] in ("int", "slice") for it in items)


def _casts(src, dst) -> bool:
    """A store converts src to dst as numpy's assignment does, and codegen compiles it."""
    return dst.kind == "f" and src.kind in "fiub" or dst.kind == "i" and src.kind in "ib"

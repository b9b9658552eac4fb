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

The loop's body is what that native loop computes: scalars, 1-D vectors
and (for products with a vector) 2-D views of basic indexing of arrays read
by the loop, elementwise math on them, dot products, matrix-vector products
and sums, maxima and minima of vectors, and stores of an element or of a
run along one axis into the one array the loop updates, in place: every
read of a version of that array comes before the store that makes the next
one, or inside that store where it provably reads no element the store
already wrote.  A body may hold loops this pass made before (loops in
loops, MAX_DEPTH deep).  A read that tracing computed once and reused in
later trips (CSE) is read again in each trip; one that later nodes use is
computed before the loop.  Anything else stays unrolled, exactly as traced.
"""
from __future__ import annotations

import numpy as np
import sympy

from clustering.passes import dce
from shapes.ir import Graph, Node, make_attrs
from shapes.loop import LoopBody, ints_of, symbolic_rest
from shapes.ops import OPS

MAX_PERIOD = 48     # nodes in one trip of a loop this pass looks for
MIN_TRIPS = 3       # trips a run needs to become a loop
MAX_DEPTH = 3       # loops in loops in loops
LOOP_DTYPES = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.bool_)}
VECTOR_REDUCTIONS = ("sum", "max", "min")
UPDATES = ("setitem", "loop")  # body nodes making the next version of the updated array


def _abstract(x):
    """x with its integers (ints_of's) blanked: nodes that differ only in them match."""
    if type(x) is tuple:
        return tuple(_abstract(y) for y in x)
    if type(x) is LoopBody:  # (nested loops match when only their integers differ)
        return ("loop", tuple(_key(n) for n in x.nodes), x.refs, x.steps, x.result)
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

def reroll(g: Graph, depth: int = MAX_DEPTH) -> Graph:
    """g with the runs that repeat (and that a native loop computes) as `loop`
    nodes; then the runs of those (loops in loops), `depth` levels deep."""
    try:
        return _reroll(g, depth)
    finally:
        _INTS.clear()  # (the graph's nodes are not kept past the pass)


def _reroll(g: Graph, depth: int) -> Graph:
    nodes = list(g.nodes)
    if len(nodes) < MIN_TRIPS * 2:
        return g
    ids: dict = {}
    keys = np.array([ids.setdefault(_key(n), len(ids)) for n in nodes], dtype=np.int64)
    if len(ids) == len(nodes):
        return g
    taken = np.zeros(len(nodes), dtype=bool)
    loops: dict[int, tuple[int, list]] = {}  # start -> (end, [reads used later, loop node])
    users = _users(g)
    producers = g.producers()
    is_set = np.array([n.op in UPDATES for n in nodes])
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
            # each phase (a trip starts after a store) cut where the integers stop moving
            # by fixed steps (an outer loop's next trip starts over): the loops of the
            # phase whose loops cover the most trips
            best: dict[int, tuple[int, list]] = {}
            for phase in sorted({a + (s + 1 - a) % p for s in sets}):
                found, start = {}, phase
                while (end - start) // p >= MIN_TRIPS:
                    trips = _affine_trips(nodes, start, p, (end - start) // p)
                    if trips >= MIN_TRIPS and not taken[start:start + trips * p].any():
                        made = _loop(nodes, start, p, trips, users, producers)
                        if made is not None:
                            found[start] = (start + trips * p, made)
                    start += trips * p
                if sum(e - s0 for s0, (e, _) in found.items()) > sum(e - s0 for s0, (e, _) in best.items()):
                    best = found
            for s0, (e, made) in best.items():
                taken[s0:e] = True
                loops[s0] = (e, made)
    if not loops:
        return g
    out, k = [], 0
    while k < len(nodes):
        if k in loops:
            end, made = loops[k]
            out += made
            k = end
        else:
            out.append(nodes[k])
            k += 1
    g = dce(Graph(g.inputs, tuple(out), g.outputs))  # (reads before a loop that only the loop needed)
    return _reroll(g, depth - 1) if depth > 1 else g


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


def _loop(nodes, start: int, p: int, trips: int, users, producers) -> list | None:
    """The loop node of nodes[start:start + trips * p] when they are `trips`
    trips of one body with affine integers that a native loop computes (after
    the last trip's reads that later nodes use), else None."""
    end = start + trips * p
    at: dict[int, tuple[int, int]] = {}
    for k in range(start, end):
        for o in nodes[k].outputs:
            at[o.id] = divmod(k - start, p)
    body = list(nodes[start:start + p])
    if any(len(n.outputs) != 1 for n in body):
        return None
    steps = _steps([nodes[start + t * p + q] for t in range(trips)] for q in range(p))
    if steps is None:
        return None
    if any(_abstract(nodes[start + t * p + q].out.shape) != _abstract(body[q].out.shape)
           for t in range(1, trips) for q in range(p)):
        return None
    # where each input of each body node comes from, trip by trip
    refs: list[list] = []
    extra: dict[int, list] = {}  # body node -> nodes computed just before it (reads tracing hoisted)
    for q in range(p):
        rs = []
        for j in range(len(body[q].inputs)):
            seen = []
            for t in range(trips):
                v = nodes[start + t * p + q].inputs[j]
                src = at.get(v.id)
                seen.append(("in", v) if src is None else ("local", src[1]) if src[0] == t else
                            ("prev", src[1]) if src[0] == t - 1 else None)
            r = _same_source(seen)
            if r is None or r[0] == "carry" and body[r[2]].op not in UPDATES:
                made = _reread(seen, nodes, start, p, producers)
                if made is None:
                    return None
                extra.setdefault(q, []).append(made)
                r = ("made", q, len(extra[q]) - 1)
            rs.append(r)
        refs.append(rs)
    # the body with the re-read nodes placed before their readers
    order: list[tuple] = []
    for q in range(p):
        order += [("made", q, i) for i in range(len(extra.get(q, ())))] + [("node", q)]
    pos = {key: k for k, key in enumerate(order)}
    final_nodes, final_refs, final_steps, ins = [], [], [], []

    def place(r):
        if r[0] == "in":
            if not any(u.id == r[1].id for u in ins):
                ins.append(r[1])
            return r
        if r[0] == "local":
            return ("local", pos[("node", r[1])])
        if r[0] == "made":
            return ("local", pos[r])
        return ("carry", r[1], pos[("node", r[2])])
    for key in order:
        if key[0] == "node":
            q = key[1]
            final_nodes.append(body[q])
            final_steps.append(steps[q])
            final_refs.append([place(r) for r in refs[q]])
        else:
            node, node_refs, node_steps = extra[key[1]][key[2]]
            final_nodes.append(node)
            final_steps.append(node_steps)
            final_refs.append([place(r) for r in node_refs])
    # what leaves the run: the updated array after the last trip, and reads of
    # arrays from before the run (in any trip: computed before the loop instead)
    outs, before = set(), []
    for k in range(start, end):
        for o in nodes[k].outputs:
            if any(u >= end for u in users.get(o.id, ())):
                t, q = divmod(k - start, p)
                if nodes[k].op == "getitem" and nodes[k].inputs[0].id not in at:
                    before.append(nodes[k])
                elif t != trips - 1:
                    return None
                else:
                    outs.add(pos[("node", q)])
    carries = {r for rs in final_refs for r in rs if r[0] == "carry"}
    if len(carries) != 1:
        return None
    (_, target, q_last), = carries
    if outs - {q_last} or any(n.inputs[0].id == target.id for n in before):
        return None
    ins = [target] + [v for v in ins if v.id != target.id]  # (the updated array is the loop's first input)
    index = {v.id: k for k, v in enumerate(ins)}
    final_refs = tuple(tuple((r[0], index[r[1].id]) + r[2:] if r[0] in ("in", "carry") else r for r in rs)
                       for rs in final_refs)
    lb = LoopBody(tuple(final_nodes), final_refs, tuple(tuple(s) for s in final_steps), trips, q_last)
    if not _computable(lb, ins, producers):
        return None
    final = nodes[start + (trips - 1) * p + order[q_last][1]].out
    return before + [Node("loop", tuple(ins), make_attrs(body=lb), (final,), body[0].loc)]


# node id -> (the node, its ints_of): re-rolling asks for a node's integers
# at every period and trip count it tries (400000 times for a 60x60 loop
# nest's 50000 nodes: 9 of its 20 s first call)
_INTS: dict[int, tuple[Node, list]] = {}


def _node_ints(n: Node) -> list:
    got = _INTS.get(id(n))
    if got is None or got[0] is not n:
        got = _INTS[id(n)] = (n, ints_of((n.attrs, n.out.shape)))
    return got[1]


def _affine_trips(nodes, start: int, p: int, trips: int) -> int:
    """How many trips from `start` (at least 1) have every integer of each
    body node moving by a fixed step."""
    per_trip = ([x for n in nodes[start + t * p:start + (t + 1) * p] for x in _node_ints(n)]
                for t in range(trips))
    return _affine(per_trip)[0]


def _steps(runs) -> list | None:
    """How much each integer moves per trip in each sequence of a body node's
    trips (ints_of order), or None when one does not move by a fixed step."""
    out = []
    for trip_nodes in runs:
        trip_nodes = list(trip_nodes)
        count, step = _affine(_node_ints(n) for n in trip_nodes)
        if count != len(trip_nodes):
            return None
        out.append(step)
    return out


def _affine(int_lists) -> tuple[int, list]:
    """(how many of the lists, from the first, are the first moved by a
    fixed step per list, that step)."""
    base, step, count = None, None, 0
    for t, xs in enumerate(int_lists):
        if base is None:
            base, step = xs, [0] * len(xs)
        elif len(xs) != len(base):
            break
        elif t == 1:
            step = [x1 - x0 for x0, x1 in zip(base, xs)]
        elif any(x != x0 + t * st for x0, x, st in zip(base, xs, step)):
            break
        count += 1
    return max(count, 1), step


def _same_source(seen) -> tuple | None:
    """One ref for an input's trip-by-trip sources: the same value or node
    each trip, or ("carry", value, q) for a value from before the run in the
    first trip and node q's of the trip before in the others; else None."""
    if any(r is None for r in seen):
        return None
    first = seen[0]
    if first[0] == "local" and all(r == first for r in seen):
        return first
    if first[0] == "in" and all(r[0] == "in" and r[1].id == first[1].id for r in seen):
        return first
    if first[0] == "in" and len(seen) > 1 and seen[1][0] == "prev" and all(r == seen[1] for r in seen[2:]):
        return ("carry", first[1], seen[1][1])
    return None


def _reread(seen, nodes, start: int, p: int, producers) -> tuple | None:
    """(node, refs, steps) computing in every trip the value an input had
    there, when each trip's is the same basic read of one array from before
    the run at integers moving by a fixed step (tracing computed it once and
    reused it: an earlier trip's read, or one before the run); else None."""
    made = []
    for t, r in enumerate(seen):
        if r is None:
            return None
        if r[0] == "in":
            n = producers.get(r[1].id)
        elif r[0] == "prev":
            n = nodes[start + (t - 1) * p + r[1]]
        else:
            n = nodes[start + t * p + r[1]]
        if n is None or n.op != "getitem" or not _basic(n.attr("items")):
            return None
        made.append(n)
    first = made[0]
    key = _key(first)
    if any(_key(n) != key or n.inputs[0].id != first.inputs[0].id for n in made):
        return None
    src = first.inputs[0]
    if any(o.id == src.id for n in nodes[start:start + len(seen) * p] for o in n.outputs):
        return None  # (an array the run computes)
    steps = _steps([made])
    if steps is None:
        return None
    return first, [("in", src)], steps[0]


# ------------------------------------------------------ what a loop computes

def _computable(lb: LoopBody, ins, producers) -> bool:
    """Whether codegen/loops.py computes this body: see the module docstring."""
    target = ins[0]
    if target.ndim == 0 or target.dtype not in LOOP_DTYPES:
        return False
    for v in ins[1:]:  # (a scalar from outside: a constant, a dim, or a value passed as an int64 or a double)
        if v.dtype not in LOOP_DTYPES:
            return False
    nodes = lb.nodes
    # where each vector is computed: it is evaluated lazily by the node that consumes it
    evaluated: dict[int, int] = {}
    for q in range(len(nodes) - 1, -1, -1):
        lazy = nodes[q].out.ndim >= 1 and nodes[q].op not in VECTOR_REDUCTIONS + UPDATES and not (
            nodes[q].op == "matmul" and nodes[q].out.ndim == 0)
        for r in lb.refs[q]:
            if r[0] == "local" and nodes[r[1]].out.ndim >= 1:
                at = evaluated.get(q, q) if lazy else q
                evaluated[r[1]] = max(evaluated.get(r[1], -1), at)
    current = ("carry",)             # the version of the updated array that is current
    superseded: dict[tuple, int] = {}  # version -> the store that makes the next one
    reads: list[tuple] = []          # (version, where it is read, the getitem)
    for q, n in enumerate(nodes):
        refs = lb.refs[q]
        if any(r[0] == "in" and r[1] == 0 for r in refs):
            return False  # (the updated array as it was before the loop)
        versions = [_version_of(r, lb) for r in refs]
        if n.op in UPDATES:
            if versions[0] != current or any(v is not None for v in versions[1:]) or not (
                    _store_ok(lb, q) if n.op == "setitem" else _nested_ok(lb, q)):
                return False
            superseded[current] = q
            current = ("local", q)
            continue
        if n.out.dtype not in LOOP_DTYPES or n.out.ndim > 1 and not (
                n.op == "getitem" and n.out.ndim == 2 and _feeds_products(lb, q)):
            return False
        if n.op == "getitem":
            if not _basic(n.attr("items")) or refs[0][0] == "local" and versions[0] is None and (
                    nodes[refs[0][1]].out.ndim != 1):
                return False
            if versions[0] is not None:
                reads.append((versions[0], evaluated.get(q, q), q))
            continue
        if any(v is not None for v in versions) or any(
                r[0] == "in" and v.ndim for r, v in zip(refs, n.inputs)):
            return False  # (arrays are read through basic indexing only)
        if n.op == "matmul":
            a, b = n.inputs
            if not (a.ndim + b.ndim <= 3 and n.out.ndim <= 1 and a.dtype == b.dtype == n.out.dtype
                    and n.out.dtype.kind == "f"):
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
            shape = lb.in_any_trip(q)[1]
            if any(r[0] == "local" and v.ndim and lb.in_any_trip(r[1])[1] not in (shape, (1,))
                   for r, v in zip(refs, n.inputs)):
                return False  # (vectors of one length, or of one element repeated)
    if not superseded or current != ("local", lb.result):
        return False
    for version, where, q in reads:
        s = superseded.get(version)
        if s is not None and not (where < s or where == s and _stored_after_read(lb, q, s, target)):
            return False
    return True


def _nested_ok(lb: LoopBody, q: int) -> bool:
    """Whether codegen runs node q, a loop, inside this one: it updates the
    array this loop updates and reads arrays this loop reads (and scalars)."""
    return all(r[0] == "in" or lb.nodes[r[1]].out.ndim == 0 for r in lb.refs[q][1:])


def _store_ok(lb: LoopBody, q: int) -> bool:
    """Whether codegen stores node q's value: one element, or a 1-D run of
    them along one sliced axis from a vector of that length or a scalar."""
    n = lb.nodes[q]
    if len(n.inputs) != 2:
        return False
    items, value = n.attr("items"), n.inputs[1]
    if len(items) != n.out.ndim or not _basic(items) or (
            value.dtype != n.out.dtype and not _casts(value.dtype, n.out.dtype)):
        return False
    kept = [it for it in items if it[0] == "slice"]
    if len(kept) > 1 or value.ndim > len(kept):
        return False
    if value.ndim == 0:
        return True
    r = lb.refs[q][1]
    if r[0] != "local":
        return False
    length = lb.in_any_trip(q)[0]["items"][items.index(kept[0])][3]
    return lb.in_any_trip(r[1])[1] == (length,)


def _feeds_products(lb: LoopBody, q: int) -> bool:
    """Whether node q's output (a matrix view) is read only by products with a vector."""
    users = [(q2, j) for q2, rs in enumerate(lb.refs) for j, r in enumerate(rs) if r == ("local", q)]
    return bool(users) and all(
        lb.nodes[q2].op == "matmul" and lb.nodes[q2].inputs[1 - j].ndim == 1 for q2, j in users)


def _stored_after_read(lb: LoopBody, q_read: int, q_store: int, target) -> bool:
    """Whether the store q_store, writing its elements in order while it
    computes them, never writes an element the read q_read (evaluated
    inside that store) reads later: the two touch disjoint elements, or
    element j of the store reads only element j of the read (_in_step) and
    the read is the store's slice or ahead of it."""
    if lb.nodes[q_store].op != "setitem":
        return False
    read = _full_items(lb.in_any_trip(q_read)[0]["items"], target.shape)
    store = lb.in_any_trip(q_store)[0]["items"]
    if any(_apart(r, w) for r, w in zip(read, store)):
        return True
    if not _in_step(lb, q_read, q_store):
        return False
    for r, w in zip(read, store):
        if r[0] != w[0]:
            return False
        if r[0] == "int" and sympy.simplify(r[1] - w[1]) != 0:
            return False
        if r[0] == "slice":
            d = sympy.simplify(r[1] - w[1])
            if not (r[2] == w[2] and _positive_int(r[2]) and d.is_nonnegative):
                return False
    return True


def _positive_int(x) -> bool:
    return isinstance(x, (int, sympy.Integer)) and x > 0


def _in_step(lb: LoopBody, q_read: int, q_store: int) -> bool:
    """Whether element j of the value q_store stores depends on element j of
    q_read's vector only: elementwise math all the way (a product reads a
    whole vector per element; one element repeated is read by its
    elementwise node, before the store)."""
    stack = [q_read]
    while stack:
        q = stack.pop()
        for u, rs in enumerate(lb.refs):
            for j, r in enumerate(rs):
                if r != ("local", q) or u == q_store and j == 1:
                    continue
                if OPS[lb.nodes[u].op].category != "elementwise":
                    return False
                if not lb.broadcast(q, u):
                    stack.append(u)
    return True


def _full_items(items, shape) -> tuple:
    """Basic items with the axes they leave out as whole slices."""
    return tuple(items) + tuple(("slice", 0, 1, shape[a]) for a in range(len(items), len(shape)))


def _apart(r, w) -> bool:
    """Whether two basic items of one axis provably name no index in common
    (an empty slice's span is empty, so the test holds for it too)."""
    def span(it):  # (first, last) index, or None
        if it[0] == "int":
            return it[1], it[1]
        _, start, step, length = it
        if not _positive_int(step):
            return None
        return start, start + step * (length - 1)
    a, b = span(r), span(w)
    if a is None or b is None:
        return False
    return bool(sympy.simplify(a[0] - b[1]).is_positive or sympy.simplify(b[0] - a[1]).is_positive)


def _version_of(r, lb: LoopBody):
    """The version of the updated array a ref names, or None when it is not one."""
    if r[0] == "carry":
        return ("carry",)
    if r[0] == "local" and lb.nodes[r[1]].op in UPDATES:
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

"""Graph passes: pure functions Graph -> Graph, run as one flat pipeline.

    decompose   mean/var/std into sum and elementwise ops (numpy's own formulas)
    dots        a vector dot as multiply + sum
    scale_out   (s * A) @ B as s * (A @ B) where an elementwise op reads the product
    split_axes  a reduction over axes of several runs as one reduction per run
    unit_dims   reductions drop their operand's dims of size 1
    rows        sum/prod/max/min over every axis as reductions over the last axis
    row_space   row reductions keep their dim, elementwise ops on row values too
    simplify    local algebra: x*1, x+0, transpose∘transpose, reshape∘reshape
    cse         structurally equal nodes computed once
    dce         nodes nobody uses removed
"""
from __future__ import annotations

import numpy as np
import sympy

from clustering.partition import (ARG_REDUCTIONS, FLOAT_DTYPES, KERNEL_DTYPES, ROW_REDUCTIONS, TINY_STATIC,
                                  defined_sizes, sizes_in)
from shapes.ir import Graph, Node, Value, make_attrs
from shapes.ops import ELEMENTWISE, OPS, OPAQUE, VIEW_OF_INPUT
from shapes.verify import verify


class _Builder:
    """Rebuilds a graph node by node with value replacements."""

    def __init__(self, g: Graph):
        self.g = g
        self.nodes: list[Node] = []
        self.subst: dict[int, Value] = {}
        self.next_id = 1 + max([v.id for v in g.inputs] + [o.id for n in g.nodes for o in n.outputs] + [-1])

    def get(self, v: Value) -> Value:
        while v.id in self.subst:
            v = self.subst[v.id]
        return v

    def new_value(self, dtype, shape, weak=False) -> Value:
        v = Value(self.next_id, np.dtype(dtype), tuple(shape), weak)
        self.next_id += 1
        return v

    def add(self, op, inputs, attrs: dict, dtype, shape, loc="", weak=False) -> Value:
        out = self.new_value(dtype, shape, weak)
        self.nodes.append(Node(op, tuple(inputs), make_attrs(**attrs), (out,), loc))
        return out

    def keep(self, n: Node) -> None:
        if not self.subst or not any(v.id in self.subst for v in n.inputs):
            self.nodes.append(n)  # (nothing it reads was replaced: itself, not a copy, for 100000s of nodes)
            return
        self.nodes.append(Node(n.op, tuple(self.get(v) for v in n.inputs), n.attrs, n.outputs, n.loc))

    def finish(self) -> Graph:
        return Graph(self.g.inputs, tuple(self.nodes), tuple(self.get(v) for v in self.g.outputs))


def _protected(g: Graph) -> set[int]:
    """Outputs that must stay fresh arrays: never replace them by an input."""
    return {v.id for v in g.outputs}


# -------------------------------------------------------------- decompose

def decompose(g: Graph) -> Graph:
    """mean -> sum / n; var -> mean((x - mean(x))**2) with ddof; std -> sqrt(var).
    These are numpy's own formulas (numpy/_core/_methods.py), in float dtypes
    (an int or bool x in float64, as numpy sums it).
    any(x) -> sum(x != 0) > 0 and all(x) -> sum(x == 0) == 0 (a count, so
    they fuse with x's producers as sums do; NaN is nonzero, as in numpy),
    for arrays kernels take that are not a few static elements."""
    b = _Builder(g)
    for n in g.nodes:
        x = b.get(n.inputs[0]) if n.inputs else None
        if n.op in ("mean", "var", "std") and n.attr("dtype") is None and (
                x.dtype.kind == "f" or x.dtype.kind in "iub" and n.out.dtype == np.float64):
            if x.dtype.kind != "f":  # (numpy's sums of ints and bools for these are in float64: each cast first)
                x = b.add("astype", [x], {"dtype": np.dtype(np.float64)}, np.float64, x.shape, n.loc)
            b.subst[n.out.id] = _decomposed(b, n, x)
            continue
        size = _count(x, None) if n.op in ("any", "all") else None
        if (size is not None and x.dtype in KERNEL_DTYPES and not {k for k, _ in n.attrs} - {"axis", "keepdims"}
                and not (isinstance(size, int) and size <= TINY_STATIC)):
            b.subst[n.out.id] = _counted(b, n, x)
            continue
        b.keep(n)
    return b.finish()


def _counted(b: _Builder, n: Node, x: Value) -> Value:
    """any/all as a count of the elements that decide it."""
    if x.dtype == np.bool_ and n.op == "any":
        flags = x
    elif x.dtype == np.bool_:
        flags = b.add("logical_not", [x], {}, np.bool_, x.shape, n.loc)
    else:
        flags = b.add("not_equal" if n.op == "any" else "equal", [x, _scalar(b, 0, n.loc)], {}, np.bool_,
                      x.shape, n.loc)
    count = b.add("sum", [flags], {"axis": n.attr("axis"), "keepdims": n.attr("keepdims", False)},
                  np.dtype(np.int_), n.out.shape, n.loc)
    return b.add("greater" if n.op == "any" else "equal", [count, _scalar(b, 0, n.loc)], {},
                 np.bool_, n.out.shape, n.loc)


def _count(x: Value, axis) -> object:
    axes = range(x.ndim) if axis is None else axis
    c = sympy.Integer(1)
    for a in axes:
        c *= x.shape[a]
    return int(c) if c.is_Integer else c


def _scalar(b: _Builder, value, loc) -> Value:
    if isinstance(value, sympy.Basic):
        return b.add("dim", [], {"expr": value}, np.int64, (), loc, weak=True)
    return b.add("const", [], {"value": value}, np.asarray(value).dtype, (), loc, weak=True)


def _decomposed(b: _Builder, n: Node, x: Value) -> Value:
    axis, keep, dt = n.attr("axis"), n.attr("keepdims", False), x.dtype
    kshape = tuple(1 if (axis is None or i in axis) else d for i, d in enumerate(x.shape))
    count = _count(x, axis)
    if n.op == "mean":  # (numpy's float16 mean adds in float32 and casts the mean back)
        acc = np.dtype(np.float32) if dt == np.float16 else dt
        if acc != dt and dt in FLOAT_DTYPES:  # (a kernel's: the exact cast, then a float32 sum it fuses)
            s = b.add("sum", [b.add("astype", [x], {"dtype": acc}, acc, x.shape, n.loc)],
                      {"axis": axis, "keepdims": keep}, acc, n.out.shape, n.loc)
        else:
            s = b.add("sum", [x], {"axis": axis, "keepdims": keep, **({"dtype": acc} if acc != dt else {})}, acc,
                      n.out.shape, n.loc)
        m = b.add("divide", [s, _scalar(b, count, n.loc)], {}, acc, n.out.shape, n.loc)
        return m if acc == dt else b.add("astype", [m], {"dtype": dt}, dt, n.out.shape, n.loc)
    s = b.add("sum", [x], {"axis": axis, "keepdims": True}, dt, kshape, n.loc)
    m = b.add("divide", [s, _scalar(b, count, n.loc)], {}, dt, kshape, n.loc)
    d = b.add("subtract", [x, m], {}, dt, x.shape, n.loc)
    sq = b.add("multiply", [d, d], {}, dt, x.shape, n.loc)
    t = b.add("sum", [sq], {"axis": axis, "keepdims": keep}, dt, n.out.shape, n.loc)
    ddof = n.attr("ddof", 0)
    rc = count - ddof
    rc = max(rc, 0) if isinstance(rc, int) else sympy.Max(rc, 0)  # numpy: maximum(count - ddof, 0)
    v = b.add("divide", [t, _scalar(b, rc, n.loc)], {}, dt, n.out.shape, n.loc)
    if n.op == "std":
        v = b.add("sqrt", [v], {}, dt, n.out.shape, n.loc)
    return v


# -------------------------------------------------------------------- dots

def dots(g: Graph) -> Graph:
    """a @ b of two float vectors becomes sum(a * b): a reduction whose
    product fuses into one row kernel, reading each vector once as BLAS's
    dot does, without numpy's matmul call (about 2 us, where a loop of
    dots such as `x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]` makes one
    call per step).  A dot of at most TINY_STATIC static elements stays a
    matmul (numpy would run its product and sum as two calls).  Matrix-vector
    products stay with BLAS, whose gemv reads a large matrix at about twice
    the bandwidth of the row kernel on 2 cores.  The sum's order is not
    BLAS's: a few ulp."""
    b = _Builder(g)
    for n in g.nodes:
        x, y = (b.get(v) for v in n.inputs) if n.op == "matmul" and len(n.inputs) == 2 else (None, None)
        if (x is None or y is None or x.ndim != 1 or y.ndim != 1 or n.attrs
                or not (x.dtype == y.dtype == n.out.dtype) or n.out.dtype.kind != "f"
                or n.out.dtype == np.float16  # (numpy's dot adds float16 products in float32: its own call)
                or isinstance(x.shape[0], (int, sympy.Integer)) and int(x.shape[0]) <= TINY_STATIC):
            b.keep(n)
            continue
        p = b.add("multiply", [x, y], {}, n.out.dtype, x.shape, n.loc)
        b.subst[n.out.id] = b.add("sum", [p], {"axis": (0,), "keepdims": False}, n.out.dtype, (), n.loc)
    return b.finish()


# --------------------------------------------------------------- scale out

def scale_out(g: Graph) -> Graph:
    """A product of a scaled operand, (alpha * A) @ B or A @ (B * alpha)
    with alpha a float scalar, becomes alpha * (A @ B) when elementwise code
    reads the product anyway (`alpha * A @ B + beta * C`, NPBench's gemm):
    the scale then joins the product's epilogue, where it was a pass of its
    own over A (as numpy's, M x K elements read and written; 4000 x 4000
    float64 in gesummv).  A chain of products moves the scale along to the
    last one (k2mm's alpha * A @ B @ C).  Only where the scaled operand is
    read by the product alone and has the product's dtype.  The scale then
    multiplies sums instead of terms: a few ulp, as BLAS's summation order
    already is."""
    uses: dict[int, int] = {}
    for n in g.nodes:
        for v in n.inputs:
            uses[v.id] = uses.get(v.id, 0) + 1
    for v in g.outputs:
        uses[v.id] = uses.get(v.id, 0) + 1
    by_out = {n.outputs[0].id: n for n in g.nodes if len(n.outputs) == 1}
    readers = {v.id: n for n in g.nodes for v in n.inputs if uses[v.id] == 1}

    def feeds_elementwise(v: Value) -> bool:
        n = readers.get(v.id)
        while n is not None and _plain_product(n):
            n = readers.get(n.outputs[0].id)  # (the scale moves on along a chain of products)
        return n is not None and OPS[n.op].category == ELEMENTWISE

    def scaled(v: Value, out: Value):
        """(scale, operand) when v is a float scalar times an operand of
        out's dtype read only here."""
        m = by_out.get(v.id)
        if m is None or m.op != "multiply" or uses[v.id] != 1 or len(m.inputs) != 2 or m.attrs:
            return None
        for s, x in (m.inputs, m.inputs[::-1]):
            if (s.shape == () and s.dtype.kind == "f" and (s.weak or s.dtype == out.dtype) and x.ndim >= 1
                    and x.dtype == v.dtype == out.dtype):
                return s, x
        return None

    b = _Builder(g)
    for n in g.nodes:
        if not _plain_product(n) or n.out.dtype.kind != "f" or not feeds_elementwise(n.out):
            b.keep(n)
            continue
        ins = [b.get(v) for v in n.inputs]
        found = [(i, scaled(ins[i], n.out)) for i in range(2)]
        found = [(i, f) for i, f in found if f is not None]
        if not found:
            b.keep(n)
            continue
        for i, (_, x) in found:
            ins[i] = x
        p = b.add("matmul", ins, {}, n.out.dtype, n.out.shape, n.loc)
        if len(found) == 2:
            p = b.add("multiply", [found[1][1][0], p], {}, n.out.dtype, n.out.shape, n.loc)
        b.nodes.append(Node("multiply", (found[0][1][0], p), make_attrs(), n.outputs, n.loc))
        by_out[n.out.id] = b.nodes[-1]  # (a product reading this one scales it out in turn)
    return b.finish()


def _plain_product(n: Node) -> bool:
    return n.op == "matmul" and len(n.inputs) == 2 and not n.attrs


# -------------------------------------------------------------- split axes

def split_axes(g: Graph) -> Graph:
    """A sum, prod, max or min over axes that are not one run (a 2x2 max
    pool, x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))) becomes
    one reduction per run of consecutive axes, the last run first, each
    keeping its dims: a row reduction over the trailing axes or a column
    reduction (clustering/partition.py), where numpy's one reduction was a
    step of its own.  (A float sum then adds in another order than numpy's:
    a few ulp; max and min are exact.)"""
    b = _Builder(g)
    for n in g.nodes:
        x = b.get(n.inputs[0]) if n.inputs else None
        axis = n.attr("axis") if n.op in ("sum", "prod", "max", "min") else None
        runs = _runs(axis) if axis else []
        if len(runs) < 2 or x.dtype not in KERNEL_DTYPES or {k for k, _ in n.attrs} - {"axis", "keepdims"} \
                or _rounds_between(n, x):
            b.keep(n)
            continue
        v = x
        for run in reversed(runs):
            shape = tuple(1 if i in run else d for i, d in enumerate(v.shape))
            v = b.add(n.op, [v], {"axis": run, "keepdims": True}, n.out.dtype, shape, n.loc)
        if tuple(v.shape) != tuple(n.out.shape):
            v = b.add("reshape", [v], {"shape": n.out.shape}, n.out.dtype, n.out.shape, n.loc)
        b.subst[n.out.id] = v
    return b.finish()


def _rounds_between(n, x) -> bool:
    """A float16 sum or product split in stages would round each stage's
    partial results to float16, where numpy's accumulates in float32 and
    rounds once (up to 36 ulp off near 0): it stays one reduction."""
    return n.op in ("sum", "prod") and x.dtype == np.float16


def _runs(axes) -> list[tuple]:
    """Sorted axes as runs of consecutive ones: (1, 3, 4) -> [(1,), (3, 4)]."""
    runs: list[list] = []
    for a in sorted(axes):
        if runs and runs[-1][-1] == a - 1:
            runs[-1].append(a)
        else:
            runs.append([a])
    return [tuple(r) for r in runs]


# --------------------------------------------------------------- unit dims

def unit_dims(g: Graph) -> Graph:
    """Reductions (sum, prod, max, min) that dims of size 1 make slow: one
    over size-1 axes only, x[n, 1].sum(axis=1), is x as a fresh array in the
    result's dtype (0.3x numpy's speed as n rows of one element, on 2
    cores); one that is a row reduction once x's size-1 dims are dropped,
    x[n, 1].sum(axis=0), becomes one (a reshape, the reduction over the
    trailing axes, a reshape to its shape: the whole sum on every core,
    where a column reduction of one column ran at 0.09x).  A reduction over
    trailing axes already stays as it is (it fuses with its producers and
    consumers), and so does a result of no dims (`rows`)."""
    b = _Builder(g)
    for n in g.nodes:
        x = b.get(n.inputs[0]) if n.inputs else None
        if (n.op not in ROW_REDUCTIONS or n.op in ARG_REDUCTIONS or x is None or not n.out.ndim
                or {k for k, _ in n.attrs} - {"axis", "keepdims"}):
            b.keep(n)
            continue
        axis = n.attr("axis")
        axes = sorted(set(range(x.ndim)) if axis is None else set(axis))
        unit = {i for i, d in enumerate(x.shape) if isinstance(d, (int, sympy.Integer)) and int(d) == 1}
        kept = [i for i in range(x.ndim) if i not in unit]
        reduced = tuple(j for j, i in enumerate(kept) if i in axes)
        trailing = lambda r, rank: tuple(r) == tuple(range(rank - len(r), rank))  # noqa: E731
        if reduced and (trailing(axes, x.ndim) or not trailing(reduced, len(kept))):
            b.keep(n)
            continue
        # (x without its size-1 dims: a kernel over them would take rows of one element)
        v = b.add("reshape", [x], {"shape": tuple(x.shape[i] for i in kept)}, x.dtype,
                  tuple(x.shape[i] for i in kept), n.loc)
        if reduced:
            shape = tuple(1 if j in reduced else d for j, d in enumerate(v.shape))
            v = b.add(n.op, [v], {"axis": reduced, "keepdims": True}, n.out.dtype, shape, n.loc)
        else:  # (x itself, as a fresh array in the reduction's dtype)
            v = b.add("astype", [v], {"dtype": n.out.dtype}, n.out.dtype, v.shape, n.loc)
            if n.op == "sum" and n.out.dtype.kind in "fc":  # (numpy's sum starts from +0.0: -0.0 gives +0.0)
                v = b.add("add", [v, _scalar(b, 0.0, n.loc)], {}, n.out.dtype, v.shape, n.loc)
        if v.shape != n.out.shape:
            v = b.add("reshape", [v], {"shape": n.out.shape}, v.dtype, n.out.shape, n.loc)
        b.subst[n.out.id] = v
    return b.finish()


# -------------------------------------------------------------------- rows

def rows(g: Graph) -> Graph:
    """A sum, prod, max or min over every axis of x becomes reductions over the
    last axis, one per dim (x.sum() = x.sum(-1).sum(-1)...): the first fuses
    with x's elementwise producers as a row kernel (clustering/partition.py),
    the last keeps its dim, and its element (or a reshape) is the result.
    (The sum is then taken in another order than numpy's pairwise one: a few
    ulp.)  An argmax or argmin of a vector likewise keeps its dim."""
    b = _Builder(g)
    for n in g.nodes:
        x = b.get(n.inputs[0]) if n.inputs else None
        if n.op in ARG_REDUCTIONS and x.ndim == 1 and n.attr("axis") in (None, 0) and not n.out.ndim:
            v = b.add(n.op, [x], {"axis": 0, "keepdims": True}, n.out.dtype, (1,), n.loc)
            b.subst[n.out.id] = b.add("getitem", [v], {"items": (("int", 0),), "shape": ()}, n.out.dtype, (), n.loc)
            continue
        axis = n.attr("axis") if n.op in ROW_REDUCTIONS and n.op not in ARG_REDUCTIONS else ()
        if x is None or x.ndim == 0 or (axis is not None and tuple(axis) != tuple(range(x.ndim))) \
                or {k for k, _ in n.attrs} - {"axis", "keepdims"} or x.ndim > 1 and _rounds_between(n, x):
            b.keep(n)
            continue
        v = x
        while v.ndim > 1:
            v = b.add(n.op, [v], {"axis": (v.ndim - 1,), "keepdims": False}, n.out.dtype, v.shape[:-1], n.loc)
        # (the last keeps its dim: a kernel's result is an array, the reshape a view)
        v = b.add(n.op, [v], {"axis": (0,), "keepdims": True}, n.out.dtype, (1,), n.loc)
        if not n.out.ndim:  # (an element: numpy's scalar, as the reduction returned)
            v = b.add("getitem", [v], {"items": (("int", 0),), "shape": ()}, n.out.dtype, (), n.loc)
        elif n.out.shape != (1,):
            v = b.add("reshape", [v], {"shape": n.out.shape}, n.out.dtype, n.out.shape, n.loc)
        b.subst[n.out.id] = v
    return b.finish()


# ------------------------------------------------------------- row space

def row_space(g: Graph) -> Graph:
    """Values of a row: a reduction over the last axis keeps its dim, and
    elementwise ops on such values (and on scalars) compute in that shape,
    the dimless value a reshape (a view) of it: `np.sqrt((x * x).sum(-1))`,
    `s / m.sum(1)`, `mx + np.log(np.exp(x - mx[:, None]).sum(1))` are then
    row values of one row kernel (clustering/partition.py fuses a [n, 1]
    value into a kernel over [n, k]; a [n] one it cannot: its iteration
    space differs).  `mx[:, None]` of such a value is the kept value itself."""
    b = _Builder(g)
    kept: dict[int, Value] = {}  # a dimless row value's id -> the same values with the row's dim kept
    for n in g.nodes:
        ins = [b.get(v) for v in n.inputs]
        if (n.op in ROW_REDUCTIONS and len(n.outputs) == 1 and n.out.ndim >= 1 and not n.attr("keepdims", False)
                and ins[0].ndim == n.out.ndim + 1 and n.attr("axis") in ((ins[0].ndim - 1,), ins[0].ndim - 1)
                and not {k for k, _ in n.attrs} - {"axis", "keepdims"}):
            attrs = dict(n.attrs)
            attrs["keepdims"] = True
            shape = tuple(n.out.shape) + (1,)
            r = b.add(n.op, ins, attrs, n.out.dtype, shape, n.loc, weak=n.out.weak)
        elif (OPS[n.op].category == ELEMENTWISE and len(n.outputs) == 1 and n.out.ndim >= 1
              and any(v.id in kept for v in ins) and all(v.id in kept or v.ndim == 0 for v in ins)
              and len({kept[v.id].shape for v in ins if v.id in kept}) == 1):
            shape = next(kept[v.id].shape for v in ins if v.id in kept)
            r = b.add(n.op, [kept.get(v.id, v) for v in ins], dict(n.attrs), n.out.dtype, shape, n.loc,
                      weak=n.out.weak)
        elif n.op in ("reshape", "getitem") and ins[0].id in kept and n.out.shape == kept[ins[0].id].shape \
                and _adds_a_unit_dim(n):
            b.subst[n.out.id] = kept[ins[0].id]  # (x[:, None] of a dimless row value: the kept one)
            continue
        else:
            b.keep(n)
            continue
        dimless = b.add("reshape", [r], {"shape": n.out.shape}, n.out.dtype, n.out.shape, n.loc, weak=n.out.weak)
        kept[dimless.id] = r
        b.subst[n.out.id] = dimless
    return b.finish()


def _adds_a_unit_dim(n: Node) -> bool:
    """A reshape, or a getitem of whole slices and one new axis at the end."""
    if n.op == "reshape":
        return True
    items = n.attr("items")
    return (items[-1] == ("new",) and all(it[0] == "slice" and it[1] == 0 and it[2] == 1 and it[3] == d
                                          for it, d in zip(items[:-1], n.inputs[0].shape))
            and len(items) == n.inputs[0].ndim + 1)


# --------------------------------------------------------------- simplify

def _const_value(n: Node | None):
    if n is None or n.op != "const":
        return None
    v = n.attr("value")
    return v if isinstance(v, (int, float, bool, np.generic)) else None


def _keeps_signed_zero(op: str, c, x: Value) -> bool:
    """x + c and x - c are x for every float x only when the zero has the
    right sign: -0.0 + 0.0 is +0.0, so x + 0.0 is not x (nor x - -0.0)."""
    if op in ("multiply", "divide") or x.dtype.kind not in "fc":
        return True
    neg = bool(np.signbit(c))
    return neg if op == "add" else not neg


def simplify(g: Graph) -> Graph:
    b = _Builder(g)
    prot = _protected(g)
    inputs = {v.id for v in g.inputs}
    prod: dict[int, Node] = {}
    for n in g.nodes:
        ins = [b.get(v) for v in n.inputs]
        out = n.outputs[0] if n.outputs else None
        rep = None
        if n.op in ("multiply", "add", "subtract", "divide") and len(ins) == 2:
            for k, other in ((0, 1), (1, 0)):
                c = _const_value(prod.get(ins[k].id))
                unit = 1 if n.op in ("multiply", "divide") else 0
                if n.op in ("subtract", "divide") and k == 0:
                    continue  # 0 - x and 1 / x are not x
                x = ins[other]
                if (c is not None and not isinstance(c, bool) and c == unit and x.dtype == out.dtype
                        and x.shape == out.shape and not x.weak and _keeps_signed_zero(n.op, c, x)):
                    rep = x                          # x * 1 -> x, x + -0.0 -> x, x - 0.0 -> x
        elif n.op == "transpose" and prod.get(ins[0].id) is not None and prod[ins[0].id].op == "transpose":
            inner = prod[ins[0].id]
            p1, p2 = inner.attr("perm"), n.attr("perm")
            perm = tuple(p1[p] for p in p2)          # transpose(transpose(x, p1), p2)
            src = b.get(inner.inputs[0])
            if perm == tuple(range(len(perm))):
                rep = src
            else:
                b.nodes.append(Node("transpose", (src,), make_attrs(perm=perm), n.outputs, n.loc))
                prod[out.id] = b.nodes[-1]
                continue
        elif n.op == "reshape" and prod.get(ins[0].id) is not None and prod[ins[0].id].op == "reshape":
            src = b.get(prod[ins[0].id].inputs[0])   # reshape(reshape(x)) -> reshape(x)
            if src.shape == out.shape:
                rep = src
            else:
                b.nodes.append(Node("reshape", (src,), n.attrs, n.outputs, n.loc))
                prod[out.id] = b.nodes[-1]
                continue
        elif n.op == "reshape" and ins[0].shape == out.shape:
            rep = ins[0]                             # reshape to its own shape
        elif (n.op == "setitem" and len(ins) == 2 and _whole(n.attr("items"), out.shape)
              and ins[1].shape == out.shape and ins[1].dtype == out.dtype and not ins[1].weak):
            rep = ins[1]                             # x[...] = v of x's shape and dtype -> v
        elif (n.op == "setitem" and len(ins) == 2 and prod.get(ins[1].id) is not None
              and prod[ins[1].id].op == "getitem" and len(prod[ins[1].id].inputs) == 1
              and b.get(prod[ins[1].id].inputs[0]).id == ins[0].id
              and prod[ins[1].id].attr("items") == n.attr("items")):
            rep = ins[0]                             # x[i] = x[i] -> x
        if rep is not None and not (out.id in prot and (rep.id in inputs or rep.id not in prod)):
            b.subst[out.id] = rep
            continue
        new = Node(n.op, tuple(ins), n.attrs, n.outputs, n.loc)
        b.nodes.append(new)
        for o in n.outputs:
            prod[o.id] = new
    return b.finish()


def _whole(items, shape) -> bool:
    """Index items that select every element, in order."""
    return len(items) == len(shape) and all(
        it[0] == "slice" and it[1] == 0 and it[2] == 1 and it[3] == d for it, d in zip(items, shape))


# -------------------------------------------------------------------- cse

def cse(g: Graph) -> Graph:
    b = _Builder(g)
    seen: dict = {}
    for n in g.nodes:
        ins = tuple(b.get(v) for v in n.inputs)
        if OPS[n.op].category != OPAQUE:
            try:
                # constants by repr too: 0.0 == -0.0 but they are different constants
                attrs = n.attrs if n.op != "const" else (n.attrs, repr(n.attr("value")))
                key = (n.op, tuple(v.id for v in ins), attrs, tuple((o.dtype, o.weak) for o in n.outputs))
                hash(key)
            except TypeError:
                key = None
            if key is not None and key in seen:
                for o, prev in zip(n.outputs, seen[key].outputs):
                    b.subst[o.id] = prev
                continue
        new = Node(n.op, ins, n.attrs, n.outputs, n.loc)
        if OPS[n.op].category != OPAQUE and key is not None:
            seen[key] = new
        b.nodes.append(new)
    # (arrays the function made apart and returns stay apart, `return x.copy(), x.copy()`: numpy's two arrays,
    # which merged would be one, a write into one seen in the other -- a view of the same one shares its
    # memory as numpy's does)
    made = {o.id: n for n in b.nodes for o in n.outputs}
    first: dict = {}
    outputs = []
    for v in g.outputs:
        w = b.get(v)
        if first.setdefault(w.id, v.id) != v.id and w.shape and w.id in made \
                and OPS[made[w.id].op].result != VIEW_OF_INPUT:
            w = b.add("astype", [w], {"dtype": w.dtype}, w.dtype, w.shape, made[w.id].loc, w.weak)
        outputs.append(w)
    return Graph(g.inputs, tuple(b.nodes), tuple(outputs))


# -------------------------------------------------------------------- dce

def dce(g: Graph, sizes=frozenset()) -> Graph:
    """Nodes nothing reads are dropped, except ops that may raise (a lifted
    loop's index out of range): then the call does; and the eager node that
    makes a data-dependent size a kept node's shape uses, or `sizes` name
    (what the function returns or its run-time checks decide on, outside
    the graph): `w[:np.unique(x).size]` reads only the size of np.unique's
    result."""
    made = defined_sizes(g)
    defined = set().union(*made.values())
    live = {v.id for v in g.outputs}
    memo: dict = {}
    sizes = set(sizes) & defined
    if defined:
        sizes |= sizes_in([v.shape for v in g.outputs], defined, memo)
    keep = []
    for n in reversed(g.nodes):
        if any(o.id in live for o in n.outputs) or OPS[n.op].raises or not sizes.isdisjoint(made.get(id(n), ())):
            keep.append(n)
            live.update(v.id for v in n.inputs)
            if defined:
                sizes |= sizes_in([n.attrs, [v.shape for v in n.inputs]], defined, memo)
    return Graph(g.inputs, tuple(reversed(keep)), g.outputs)


def data_dependent_sizes(exprs) -> frozenset:
    """The data-dependent sizes (u0, u1, ...) in these expressions (what a
    call returns or checks outside its graph: run_pipeline's `sizes`)."""
    return frozenset(sizes_in(list(exprs), None))


PIPELINE = [decompose, dots, scale_out, split_axes, unit_dims, rows, row_space, simplify, cse, dce]


def run_pipeline(g: Graph, checks: bool = False, sizes=frozenset()) -> Graph:
    """The passes in order; `sizes`: data-dependent sizes used outside the
    graph (dce keeps the nodes that make them)."""
    for p in PIPELINE:
        g = dce(g, sizes) if p is dce else p(g)
        if checks:
            verify(g)
    return g

"""Partition a graph into fused kernels and eager (numpy) steps.

A kernel iterates a domain R + (n,): R rows, each of n elements.  Its
members are elementwise nodes whose shapes broadcast into the domain, and
reductions over the last axis whose input is the whole domain (softmax,
layernorm and RMSNorm become one kernel that keeps a row in cache).  Every
decision compares shapes symbolically (they are already simplified by the
shape environment), and every refusal records why, for explain().
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import sympy

from shapes import host
from shapes.ir import ArrayConst, Graph, Node, Value, format_node, value_names
from shapes.ops import (COMPLEX_ONLY, ELEMENTWISE, FRESH_C, LIFTED, LOOP, MATMUL, NUMPY, OPAQUE, OPS, REDUCE,
                        kernel_ops, ops_returning)

# float16 is computed in float32 and rounded after every op (codegen/abi.py LLTYPE), with the
# F16C conversions of every x86 CPU with AVX2; without them LLVM would call compiler-rt's, which the
# process does not have: numpy runs float16 there
FLOAT_DTYPES = {np.dtype(np.float32), np.dtype(np.float64)} | ({np.dtype(np.float16)} if host.has_f16c() else set())
INT_DTYPES = {np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                    np.uint64)}
COMPLEX_DTYPES = {np.dtype(np.complex64), np.dtype(np.complex128)}
KERNEL_DTYPES = FLOAT_DTYPES | INT_DTYPES | {np.dtype(np.bool_)} | COMPLEX_DTYPES

ROW_REDUCTIONS = kernel_ops(REDUCE)  # (over the last axis; or a column reduction: is_column_reduction)
ARG_REDUCTIONS = frozenset({"argmax", "argmin"})  # (of those, the index of a row's first extreme: rows only)
COMPARISONS = frozenset(n for n in kernel_ops() if OPS[n].compute == "promoted")
FLOAT_PREDICATES = frozenset(n for n in kernel_ops() if OPS[n].compute == "operand")  # float in, bool out
POWER_EXPONENTS = {1, 2, 3, 4, 0.5, -1, -2, -3, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5}  # (of floats)
TINY_STATIC = 64  # elements: a fully static iteration space this small stays in numpy
# members of one kernel at most: an unrolled loop's chain of thousands of ops
# (`for n in range(150): z = where(abs(z) < 2, z * z + c, z)`) becomes kernels
# of this many, each compiled in bounded time (codegen computes a member's
# value recursively, and LLVM's passes grow worse than linearly in a body)
MAX_KERNEL_NODES = 128
MAX_SIBLINGS = 8  # reduction kernels reading one array that are merged (more are left apart)


@dataclass
class Kernel:
    name: str
    nodes: list[Node]
    domain: tuple
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    matmul_inputs: list[Value] = field(default_factory=list)  # an epilogue of these products

    @property
    def has_reduction(self) -> bool:
        return any(is_row_reduction(n) for n in self.nodes)

    @property
    def column(self) -> bool:
        """A column reduction kernel (is_column_reduction): it reduces over
        the axes before the last, in a batch over the leading ones it keeps."""
        return any(is_column_reduction(n) for n in self.nodes)


_FRESH_C = ops_returning(FRESH_C)  # ops whose results are fresh C-ordered arrays


@dataclass
class Plan:
    graph: Graph
    steps: list  # Kernel | Node, in execution order
    refusals: list[str]

    def kernels(self) -> list[Kernel]:
        return [s for s in self.steps if isinstance(s, Kernel)]

    def contiguous_values(self, input_contiguous: list[bool]) -> set[int]:
        """The ids of the values known C-contiguous before the call: the
        inputs `input_contiguous` says are, the kernels' outputs, contiguous
        array constants, fresh C-ordered results and their reshapes."""
        out = {v.id for v, c in zip(self.graph.inputs, input_contiguous) if c}
        out |= {v.id for k in self.kernels() for v in k.outputs}
        for n in self.graph.nodes:
            if n.op == "const" and isinstance(n.attr("value"), ArrayConst):
                if n.attr("value").array.flags.c_contiguous:
                    out.add(n.out.id)
            elif n.op in _FRESH_C:
                out.update(o.id for o in n.outputs)
            elif n.op == "reshape" and n.inputs[0].id in out:
                out.add(n.out.id)
        return out

    def describe(self, on_gemm=frozenset(), in_store=frozenset()) -> str:
        """The steps as text; `on_gemm`: the matmul outputs lowering put on
        the GEMM library kernel, `in_store`: the kernels (by name) it runs in
        their GEMM's store (codegen's decisions: codegen.lower.Lowered)."""
        names = value_names(self.graph)
        lines = []
        for s in self.steps:
            if isinstance(s, Kernel):
                kind = ("matmul epilogue in the GEMM store" if s.name in in_store else
                        "matmul epilogue pass" if s.matmul_inputs else "column reduction" if s.column else
                        "row kernel" if s.has_reduction else "loop kernel")
                dom = ", ".join(str(d) for d in s.domain)
                lines.append(f"{s.name}: {kind} over [{dom}]  in: {', '.join(names[v.id] for v in s.inputs)}"
                             f"  out: {', '.join(names[v.id] for v in s.outputs)}")
                lines += ["    " + format_node(n, names) for n in s.nodes]
            elif s.op == "matmul" and s.out.id in on_gemm:
                lines.append("gemm kernel: " + format_node(s, names))
            elif s.op == "loop":
                lines.append("re-rolled loop: " + format_node(s, names))
            else:
                lines.append("numpy: " + format_node(s, names))
        if self.refusals:
            lines.append("not fused:")
            lines += ["    " + r for r in self.refusals]
        return "\n".join(lines)


_KIND_REFUSAL = {"f": "not compiled for floats", "i": "integer math", "u": "unsigned integer math",
                 "b": "bool math", "c": "complex math"}


def kernel_op_ok(n: Node, producers) -> str | None:
    """None when n can be a kernel member, else the reason it cannot."""
    op = n.op
    fact = OPS.get(op)
    if fact is None or not fact.kernel:
        return f"{op}: no kernel emitter"
    if len(n.outputs) != 1 or n.out.ndim == 0 and (op in ROW_REDUCTIONS or fact.category != ELEMENTWISE):
        return f"{op}: scalar result"
    if n.out.dtype not in KERNEL_DTYPES:
        return f"{op}: dtype {n.out.dtype}"
    if op in COMPLEX_ONLY and not any(v.dtype in COMPLEX_DTYPES for v in n.inputs + n.outputs):
        return f"{op}: of real numbers"
    for v in n.inputs:
        if v.ndim == 0:
            # (a runtime scalar reaches a kernel as a double or, integer or bool, as an int64)
            if v.dtype not in KERNEL_DTYPES:
                return f"{op}: scalar operand of dtype {v.dtype}"
        elif v.dtype not in KERNEL_DTYPES:
            return f"{op}: operand dtype {v.dtype}"
    if op == "power":
        p = producers.get(n.inputs[1].id)
        c = p.attr("value") if p is not None and p.op == "const" else None
        ok = (POWER_EXPONENTS if n.out.dtype in FLOAT_DTYPES else {1, 2, 3} if n.out.dtype in COMPLEX_DTYPES
              else {1, 2, 3, 4})
        if n.out.ndim == 0:  # (a scalar's ** is C's pow, as Python's and numpy's scalars compute it: exactly)
            ok = ok & {1, 2, -1}
        if c is None or isinstance(c, bool) or isinstance(c, complex) or c not in ok:
            return ("power: only constant exponents 2, 3, 4 (and -1, -2, -3 and halves from -3.5 to 3.5 for "
                    "floats; 2, 3 for complex numbers) are compiled")
    if op in ROW_REDUCTIONS:
        x = n.inputs[0]
        if n.attr("dtype") is not None or x.dtype not in FLOAT_DTYPES | INT_DTYPES | (
                {np.dtype(np.bool_)} if op in ("sum", "prod") or op in ARG_REDUCTIONS else set()):
            return f"{op}: dtype"
        if not (is_row_reduction(n) or is_column_reduction(n)):
            return (f"{op}: only over the last axis" if op in ARG_REDUCTIONS else
                    f"{op}: only reductions over the last axis, or over consecutive axes before it, fuse") \
                + f" (axis={n.attr('axis')})"
    if op in ARG_REDUCTIONS and n.inputs[0].dtype == np.uint64:
        return f"{op}: of uint64 values (compared as int64 in a kernel)"
    if fact.compute == "promoted":
        ct = compare_dtype(n.inputs)
        if ct is None:
            return (f"{op}: of {' and '.join('a Python int' if v.weak else str(v.dtype) for v in n.inputs)} "
                    "(numpy compares them exactly)")
        if ct in COMPLEX_DTYPES and op not in ("equal", "not_equal"):
            return f"{op}: orders complex numbers"
        return None if ct in KERNEL_DTYPES else f"{op}: compares in {ct}"
    if op == "astype":
        x = n.inputs[0]  # (a Python int's value may lie beyond int64: unknown)
        src = x.dtype if x.ndim or not x.weak or x.dtype.kind != "i" else None
        if n.out.dtype in INT_DTYPES and (src is None or src.kind == "f"):
            return "astype: float to integer (numpy's out-of-range result depends on the CPU)"
        if n.out.dtype.kind in "fi" and (src is None or src.kind == "c"):
            return "astype: complex to a real dtype (numpy drops the imaginary part with a warning)"
        return None
    if fact.compute == "operand" and n.inputs[0].dtype not in FLOAT_DTYPES | (
            COMPLEX_DTYPES if op != "signbit" else set()):
        return f"{op}: of a {n.inputs[0].dtype} operand"
    kind = n.out.dtype.kind
    return None if kind in fact.kernel else f"{op}: {_KIND_REFUSAL[kind]}"


def is_row_reduction(n: Node) -> bool:
    return n.op in ROW_REDUCTIONS and reduced_axes(n) == (n.inputs[0].ndim - 1,)


def reduced_axes(n: Node) -> tuple | None:
    """The axes reduction `n` reduces (None: every axis, of more than one):
    argmax's and argmin's axis is one int, or None for the flattened array."""
    axis = n.attr("axis")
    if n.op not in ARG_REDUCTIONS:
        return axis
    if axis is None:
        return (0,) if n.inputs[0].ndim == 1 else None
    return (axis,)


def is_column_reduction(n: Node) -> bool:
    """Over axes p..q, consecutive, the last one kept (x.sum(0) of a matrix,
    x.sum((1, 2)) of NHWC images, x.mean(0) of a stack of images,
    x.argmax(0)): a kernel of its own kind."""
    if n.op not in ROW_REDUCTIONS:
        return False
    x, axis = n.inputs[0], reduced_axes(n)
    return (x.ndim >= 2 and bool(axis) and axis == tuple(range(axis[0], axis[-1] + 1))
            and axis[-1] <= x.ndim - 2)


def compare_dtype(inputs) -> np.dtype | None:
    """The dtype numpy compares in: the operands' promotion (NEP 50), but
    int64 for integers compared with a Python int (numpy 2 compares it
    exactly, even beyond the array's dtype: x_int32 > 2**40 is False); None
    where numpy compares exactly and no dtype of ours does (uint64 with
    int64, or with a Python int)."""
    from shapes.ops import _cached_dtypes
    if all(v.dtype == np.bool_ for v in inputs):
        return np.dtype(np.bool_)
    ct = _cached_dtypes(np.add, tuple((v.dtype, v.ndim, v.weak) for v in inputs), ())[0]
    ints = all(v.dtype.kind in "iub" for v in inputs)
    if ints and ct.kind == "f":
        return None
    if ct.kind in "iu" and any(v.weak and v.dtype.kind in "iu" for v in inputs):
        return None if ct == np.uint64 else np.dtype(np.int64)
    return ct


def _domain_of(n: Node) -> tuple:
    return n.inputs[0].shape if n.op in ROW_REDUCTIONS else n.out.shape


def broadcasts_into(small: tuple, big: tuple) -> bool:
    if len(small) > len(big):
        return False
    off = len(big) - len(small)
    return all(d == 1 or d == big[off + i] for i, d in enumerate(small))


def partition(g: Graph) -> Plan:
    producers = g.producers()
    pidx = {o.id: k for k, n in enumerate(g.nodes) for o in n.outputs}
    succ: dict[int, list[int]] = {k: [] for k in range(len(g.nodes))}
    for k, n in enumerate(g.nodes):
        for v in n.inputs:
            if v.id in pidx:
                succ[pidx[v.id]].append(k)
    for m, k in _size_edges(g):  # (a kernel holding a node that uses a size never holds one its maker reads)
        succ[m].append(k)
    refusals: list[str] = []
    names = value_names(g)
    succ = _Succ(succ, _steps_before(g), pidx)
    group: dict[int, int] = {}          # node index -> group id
    members: dict[int, set[int]] = {}   # group id -> node indices

    scalars = []  # 0-d elementwise nodes: placed after the kernels form
    for k, n in enumerate(g.nodes):
        why = kernel_op_ok(n, producers)
        if why is not None:
            if OPS[n.op].category in _FUSIBLE_CATEGORIES:
                refusals.append(f"{format_node(n, names)}  # {why}")
            continue
        if n.out.ndim == 0:
            scalars.append(k)
            continue
        group[k], members[k] = k, {k}
        for v in n.inputs:
            p = pidx.get(v.id)
            if p is None or p not in group or group[p] == group[k]:
                continue
            mine, other = group[k], group[p]
            why = _merge_refusal(g, members[mine] | members[other], succ)
            if why:
                refusals.append(f"{names[v.id]} -> {format_node(n, names)}  # {why}")
                continue
            for m in members[other]:
                group[m] = mine
            members[mine] |= members.pop(other)
    _place_scalars(g, scalars, group, members, succ, refusals, names)
    _merge_siblings(g, group, members, succ)
    kernels = _make_kernels(g, members, succ, producers, refusals, names)
    return Plan(g, _schedule(g, kernels), refusals)


def _place_scalars(g, scalars, group, members, succ, refusals, names) -> None:
    """A 0-d elementwise node (x.sum() / n, s * s + 1) joins the one kernel
    that reads it (through other such nodes: the last of a chain first);
    one that several kernels, a numpy step or the caller read stays a numpy
    step (never a bridge that would merge the kernels that read it: an
    unrolled loop's iterations sharing a bound would become one kernel)."""
    outs = {v.id for v in g.outputs}
    for k in reversed(scalars):
        readers = {group.get(u) for u in succ[k]}
        if len(readers) != 1 or None in readers or g.nodes[k].out.id in outs:
            why = ("read by several kernels" if len(readers) > 1 and None not in readers else
                   "read outside a kernel")
            refusals.append(f"{format_node(g.nodes[k], names)}  # a scalar {why}: numpy")
            continue
        (gid,) = readers
        why = _merge_refusal(g, members[gid] | {k}, succ)
        if why:
            refusals.append(f"{format_node(g.nodes[k], names)}  # {why}")
            continue
        group[k] = gid
        members[gid].add(k)


def _merge_siblings(g, group, members, succ) -> None:
    """Kernels of reductions that read the same array (x.max(0) and
    x.min(0), x.sum(1) and (x * x).sum(1)) become one, which reads it once:
    fusion along no edge (horizontal), where the merge rules allow it."""
    readers: dict[int, list[int]] = {}
    for gid, ms in members.items():
        if any(g.nodes[m].op in ROW_REDUCTIONS for m in ms):
            ids = {g.nodes[m].out.id for m in ms}
            for v in {v.id for m in ms for v in g.nodes[m].inputs if v.ndim and v.id not in ids}:
                readers.setdefault(v, []).append(gid)
    into: dict[int, int] = {}  # a group merged away -> the group it joined

    def find(gid):
        while gid in into:
            gid = into[gid]
        return gid
    for gids in readers.values():
        if len(gids) > MAX_SIBLINGS:  # (an unrolled loop's iterations: each its own kernel, compiled in bounded time)
            continue
        live: list[int] = []
        for gid in map(find, gids):
            live = list(dict.fromkeys(map(find, live)))
            if gid in live:
                continue
            for other in live:
                if _merge_refusal(g, members[other] | members[gid], succ) is None:
                    for m in members[gid]:
                        group[m] = other
                    members[other] |= members.pop(gid)
                    into[gid] = other
                    break
            else:
                live.append(gid)


# ops a kernel could hold, whose refusals explain() lists: the others (views,
# products, creation, loops, numpy's steps) are never kernel members
_FUSIBLE_CATEGORIES = (ELEMENTWISE, REDUCE)


class _Succ(dict):
    """The graph's successor lists (node index -> the indexes that read it),
    with `steps`: _steps_before(g), and `producer`: value id -> the index of
    the node that makes it."""

    def __init__(self, succ: dict, steps: list[int], producer: dict[int, int]):
        super().__init__(succ)
        self.steps, self.producer = steps, producer


# Steps that compute an array outside kernels: products, numpy's functions,
# loops.  (Views, constants and creation are cheap, and 0-d results small.)
_STEPS = (MATMUL, NUMPY, OPAQUE, LOOP, LIFTED)


def _steps_before(g) -> list[int]:
    """[k]: how many of g's first k nodes are such steps (_STEPS)."""
    out = [0]
    for n in g.nodes:
        out.append(out[-1] + (OPS[n.op].category in _STEPS and any(o.ndim for o in n.outputs)))
    return out


# A kernel waits for its last input, and holds every step's result its
# members read until it runs.  Where its members would run before later steps
# in the program's order (an unrolled loop's `P0 += X` after each
# np.linalg.solve), at most this many such results wait across those steps;
# more and the members stay apart, each where numpy runs it.  In NPBench's
# contour_integral S (32 solves, each X 120 kB) one kernel for the 32 `P0 += X`
# held 3.8 MB a call, which glibc's malloc gave back to the system and took
# again every call (1981 brk calls against numpy's 302 in 120 calls, strace
# -c): 0.85x numpy; 1.05x with its trim threshold raised.
MAX_HELD = 1


def _holds_across_steps(g, union: set[int], succ: _Succ) -> int:
    """How many step results members of `union` read that wait across a
    later step for the kernel's last node."""
    last = max(union)
    before = succ.steps
    held = set()
    for m in union:
        if before[last] - before[m + 1] == 0:
            continue  # (no step between this member and the kernel's end)
        for v in g.nodes[m].inputs:
            p = succ.producer.get(v.id) if v.ndim else None
            if p is not None and p not in union and OPS[g.nodes[p].op].category in _STEPS:
                held.add(p)
    return len(held)


def _merge_refusal(g, union: set[int], succ: _Succ) -> str | None:
    if len(union) > MAX_KERNEL_NODES:
        return f"a kernel holds at most {MAX_KERNEL_NODES} ops"
    dom = _max_domain([g.nodes[m] for m in union])
    if dom is None:
        return "iteration spaces differ"
    columns = [m for m in union if is_column_reduction(g.nodes[m])]
    if columns and any(is_row_reduction(g.nodes[m]) for m in union):
        return "row and column reductions do not share a kernel"
    if len({reduced_axes(g.nodes[m]) for m in columns}) > 1:
        return "column reductions over other axes do not share a kernel"
    if columns:
        why = _column_values_refusal(g, union, columns, succ)
        if why:
            return why
    for m in union:
        n = g.nodes[m]
        if n.op in ROW_REDUCTIONS and tuple(n.inputs[0].shape) != tuple(dom):
            return "a reduction's input must cover the whole iteration space"
        if n.op in ROW_REDUCTIONS and n.out.ndim != len(dom) and any(s in union for s in succ[m]) and not (
                is_column_reduction(n) and reduced_axes(n)[0] == 0):  # (its result lines up from the right)
            # without keepdims the row result broadcasts along the last axis
            # (numpy aligns shapes from the right), not along its row
            return "a reduction without keepdims=True is used elementwise: it broadcasts across rows"
    if not _convex(union, succ):
        return "fusing would create a cycle through a step outside the kernel"
    if _holds_across_steps(g, union, succ) > MAX_HELD:
        return (f"it would hold over {MAX_HELD} product or numpy step result across later steps "
                "(each runs where numpy would, its input freed)")
    return None


def column_values(g, union, columns, succ) -> set[int]:
    """The members of `union` computed from its column reductions: its
    column values."""
    out, stack = set(), [s for m in columns for s in succ[m] if s in union]
    while stack:
        k = stack.pop()
        if k not in out:
            out.add(k)
            stack += [s for s in succ[k] if s in union]
    return out


def column_shapes(reductions) -> set | None:
    """The result shapes of column reductions that can share a kernel (one
    layout: x.sum(0, keepdims=True) and x.max(0)), None if they cannot."""
    def layout(n):  # (the result's shape without the reduced axes keepdims keeps)
        axes = set(reduced_axes(n)) if n.attr("keepdims") else set()
        return tuple(d for k, d in enumerate(n.out.shape) if k not in axes)
    return {tuple(n.out.shape) for n in reductions} if len({layout(n) for n in reductions}) == 1 else None


def _column_values_refusal(g, union, columns, succ) -> str | None:
    """Elementwise ops of a column reduction's result (x.sum(0) / n, the
    sqrt of a column variance) are column values of its kernel, computed
    when every row is in: of the result's shape, with operands that are the
    reductions, other column values or values from outside."""
    shapes = column_shapes([g.nodes[m] for m in columns])
    if shapes is None:
        return "column reductions of other result shapes do not share a kernel"
    post = column_values(g, union, columns, succ)
    if not post:
        return None
    if not all(g.nodes[m].attr("keepdims") or reduced_axes(g.nodes[m])[0] == 0 for m in columns):
        # (without keepdims the result's axes no longer line up with the domain's)
        return "a column reduction without keepdims=True over inner axes ends its kernel"
    ids = {g.nodes[m].out.id: m for m in union}
    for m in post:
        n = g.nodes[m]
        if OPS[n.op].category != ELEMENTWISE or tuple(n.out.shape) not in shapes:
            return "a column reduction ends its kernel (its result is complete only after every row)"
        if any(ids.get(v.id) is not None and ids[v.id] not in post and ids[v.id] not in columns
               for v in n.inputs):
            return "a column value of a value every row computes"
    return None


def _convex(union: set[int], succ) -> bool:
    """No path leaves the set and comes back into it.  (Node indices are in
    graph order and edges go forward, so such a path stays below the set's
    last node: the search stops there, which keeps partitioning an unrolled
    loop's thousands of nodes linear-ish instead of quadratic.)"""
    last = max(union)
    stack = [s for m in union for s in succ[m] if s not in union and s < last]
    seen = set(stack)
    while stack:
        k = stack.pop()
        for s in succ[k]:
            if s in union:
                return False
            if s not in seen and s < last:
                seen.add(s)
                stack.append(s)
    return True


def _max_domain(nodes):
    """The domain every member broadcasts into, or None."""
    best = None
    for n in nodes:
        d = tuple(_domain_of(n))
        if best is None or broadcasts_into(best, d):
            best = d
        elif not broadcasts_into(d, best):
            return None
    return best


def _make_kernels(g, members, succ, producers, refusals, names) -> list[Kernel]:
    out_ids = {v.id for v in g.outputs}
    users: dict[int, list[int]] = {}
    for k, n in enumerate(g.nodes):
        for v in n.inputs:
            users.setdefault(v.id, []).append(k)
    kernels = []
    pending = [sorted(m) for m in members.values()]
    while pending:
        idxs = pending.pop()
        nodes = [g.nodes[i] for i in idxs]
        dom = _max_domain(nodes)
        if dom is None:  # (what is left of a group split below need not share one domain: each its own)
            pending += [[i] for i in idxs]
            continue
        if all(isinstance(d, int) for d in dom) and int(np.prod(dom)) <= TINY_STATIC:
            # nothing to gain, and LLVM's loop vectorizer can spend a minute on a
            # large body (f64 sin) in a loop whose loads are all invariant
            refusals.append(f"{format_node(nodes[-1], names)}  # " + (
                "scalars alone: numpy" if not dom else
                f"tiny static iteration space [{', '.join(map(str, dom))}]: numpy"))
            continue
        if all(n.op in ARG_REDUCTIONS and not is_column_reduction(n) for n in nodes):
            # (nothing fused into it: numpy's argmax and argmin read a row in vectors, and
            # a kernel's blocks ran at 0.6-0.7x their speed for rows of 4000-50000 floats,
            # AMD EPYC znver4, AVX-512; over another axis numpy copies x with that axis last)
            refusals.append(f"{format_node(nodes[-1], names)}  # an {nodes[-1].op} of an array alone: numpy")
            continue
        member_set = set(idxs)
        outputs, bad = [], None
        column = any(is_column_reduction(n) for n in nodes)
        col_shapes = column_shapes([n for n in nodes if is_column_reduction(n)]) or set()
        for i, n in zip(idxs, nodes):
            v = n.out
            if v.id not in out_ids and all(u in member_set for u in users.get(v.id, [])) and not (
                    column and is_column_reduction(n)):  # (a column reduction accumulates in its output)
                continue
            if v.ndim == 0 and dom:
                bad = i  # (computed at every point of the domain: written by none)
                break
            if column and (is_column_reduction(n) or tuple(v.shape) in col_shapes) or not column and (
                    tuple(v.shape) == dom or _is_row_shape(v.shape, dom[:-1])):
                outputs.append(v)
            else:
                bad = i
                break
        if bad is not None:
            if g.nodes[bad].out.ndim == 0:  # (a step of its own in numpy)
                refusals.append(f"{format_node(g.nodes[bad], names)}  # a scalar read outside a kernel over "
                                f"[{', '.join(map(str, dom))}]: numpy")
            else:
                refusals.append(f"{format_node(g.nodes[bad], names)}  # needed outside a kernel over "
                                f"[{', '.join(map(str, dom))}] with another shape: its own kernel")
                pending.append([bad])
            rest = set(idxs) - {bad}
            if rest:
                pending += [sorted(rest)] if _convex(rest, succ) else [[i] for i in sorted(rest)]
            continue
        inputs, seen = [], set()
        member_ids = {n.out.id for n in nodes}
        for n in nodes:
            for v in n.inputs:
                if v.id not in member_ids and v.id not in seen:
                    seen.add(v.id)
                    inputs.append(v)
        mm = [v for v in inputs if v.id in producers and producers[v.id].op == "matmul"
              and tuple(v.shape) == dom]
        kernels.append(Kernel("", nodes, dom, inputs, outputs, mm))
    order = {id(n): k for k, n in enumerate(g.nodes)}
    kernels.sort(key=lambda kern: order[id(kern.nodes[-1])])
    for k, kern in enumerate(kernels):
        kern.name = f"k{k}"
    return kernels


def _is_row_shape(shape, rows) -> bool:
    shape = tuple(shape)
    return shape == tuple(rows) or shape == tuple(rows) + (1,)


def defined_sizes(g: Graph) -> dict:
    """{id(node): the data-dependent sizes it makes}: an eager node's output
    shapes, an index_dim's value, a scan's stacked outputs' (jit/tracer.py,
    jit/scan.py; no other node makes one)."""
    return {id(n): {n.attr("symbol")} if n.op == "index_dim" else sizes_in(
        [o.shape for o in n.outputs[n.attr("call").n_carried if n.op == "scan" else 0:]], None)
        for n in g.nodes if n.op in ("eager", "index_dim", "scan")}


def sizes_in(x, among, memo=None) -> set:
    """The data-dependent size symbols (shapes/env.py: u0, u1, ...; of
    `among`, when given) in x: an expression, or tuples and lists of them."""
    if isinstance(x, int):
        return set()
    if isinstance(x, sympy.Basic):
        if memo is not None and x in memo:
            return memo[x]
        found = {s for s in x.free_symbols if (s in among if among is not None else s.name.startswith("u"))}
        if memo is not None:
            memo[x] = found
        return found
    if isinstance(x, (tuple, list)):
        return set().union(*(sizes_in(y, among, memo) for y in x))
    return set()


def _size_edges(g: Graph) -> list[tuple[int, int]]:
    """(the node that makes a data-dependent size, a later node whose attrs
    or shape use it), by node index: edges no value carries (`np.zeros(u)`
    of a size bound from a traced max)."""
    made, maker = defined_sizes(g), {}
    for k, n in enumerate(g.nodes):
        for u in made.get(id(n), ()):
            maker.setdefault(u, k)
    if not maker:
        return []
    return [(maker[u], k) for k, n in enumerate(g.nodes)
            for u in sizes_in([n.attrs, [o.shape for o in n.outputs]], maker.keys()) if maker[u] != k]


def _kahn(steps: list, owner: dict, index: dict, size_deps: dict) -> list | None:
    """The steps in a topological order of their values' edges and
    `size_deps` (step -> the steps it must follow), the first ready one in
    graph order each time; None for a cycle."""
    users: dict[int, list[int]] = {k: [] for k in range(len(steps))}
    waiting = []
    for k, s in enumerate(steps):
        deps = {index[id(owner[v.id])] for v in s.inputs if v.id in owner and owner[v.id] is not s}
        deps |= size_deps.get(k, set())
        waiting.append(len(deps))
        for d in deps:
            users[d].append(k)
    ready = [k for k, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(steps[k])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    return order if len(order) == len(steps) else None


def _schedule(g: Graph, kernels: list[Kernel]) -> list:
    """Steps in a topological order (kernels are convex, so one exists)."""
    owner: dict[int, object] = {}
    in_kernel = {id(n): kern for kern in kernels for n in kern.nodes}
    steps: list = []
    placed: set[int] = set()
    for n in g.nodes:
        s = in_kernel.get(id(n), n)
        if id(s) not in placed:
            placed.add(id(s))
            steps.append(s)
        for o in n.outputs:
            owner[o.id] = s
    index = {id(s): k for k, s in enumerate(steps)}
    step_of = [index[id(in_kernel.get(id(n), n))] for n in g.nodes]
    # (a step that uses a data-dependent size comes after the step that makes it: an index's
    # view reads no value of the index_dim that binds its offset; a size a later step makes, which a
    # unification put in an earlier step's slice, `best[:n - w[i]]` read before `cand[w[i]:]` is
    # written, moves that step after it, unless the maker needs that step (k-means' bincount):
    # then only the edges from the makers earlier in the graph)
    edges = _size_edges(g)
    for forward_only in (False, True):
        size_deps: dict[int, set[int]] = {}
        for m, k in edges:
            if step_of[m] != step_of[k] and (m < k or not forward_only):
                size_deps.setdefault(step_of[k], set()).add(step_of[m])
        order = _kahn(steps, owner, index, size_deps)
        if order is not None:
            return order
    raise AssertionError("kernel partition has a cycle")

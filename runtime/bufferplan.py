"""An executable's buffer plan, from its steps and outputs: which values
live in the call's pooled buffers, where each value is last read (and freed
after), which updates write into their target's buffer instead of a copy,
and the memory model (bytes a call allocates, its peak live bytes) as a
function of the bound dims."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy

from shapes.ir import Node
from shapes.kernelargs import ERRCELL
from shapes.ops import EXTERNAL, FRESH, FRESH_C, GATHER, NUMPY_UPDATES, OPS, VIEW_OF_INPUT, ops_returning
from shapes.pyexpr import compile_source, exprs_source
from runtime.kernelcall import KernelCall


def step_io(s):
    if isinstance(s, KernelCall):
        return list(s.inputs), [o[0] for o in s.outputs]
    return [v.id for v in s.inputs], [o.id for o in s.outputs]



# ops whose result is a new array (never a view of an operand, nor its buffer)
_FRESH = ops_returning(FRESH, FRESH_C)


def poolable(steps, outputs) -> set[int]:
    """Values that never leave the executable: produced by a kernel or a
    matmul, not returned, and read only by kernels or ops making new arrays."""
    out_ids = {o.value_id for o in outputs if o.value_id is not None}
    cands, ok = set(), {}
    for st in steps:
        if isinstance(st, KernelCall):
            if not st.target and not st.lifted:
                cands.update(o[0] for o in st.outputs)
        elif (st.op == "matmul" and st.out.dtype.kind == "f" and st.out.ndim >= 2
              and all(v.dtype == st.out.dtype for v in st.inputs)):
            cands.add(st.out.id)  # (a dot product stays numpy's scalar: 0-d array arithmetic is slow)
        for vid in step_io(st)[0]:
            fine = isinstance(st, KernelCall) or st.op in _FRESH
            ok[vid] = ok.get(vid, True) and fine
    return {v for v in cands if v not in out_ids and ok.get(v, False)}



@dataclass(frozen=True)
class BufferPlan:
    """What the generated source does with each buffer (by value id)."""
    last_use: dict      # value -> the index of the last step that reads it
    dead_after: dict    # step index -> the values (not returned) last read there: freed after it
    in_place: set       # setitem (or re-rolled loop) outputs written into their target's buffer
    direct: dict        # kernel output -> the in-place setitem whose slot the kernel writes straight into
    into_operand: dict  # step index -> the operand view a numpy ufunc step computes into
    stored: set         # setitem outputs whose value is already in place (into_operand)
    into_argument: dict  # kernel output -> the argument it is written back into, which the kernel writes


def last_stop(steps, outputs, dd_dims, dd_checks) -> int | None:
    """The last step at which (or right after which) a call may stop midway
    and run in numpy or another entry instead (a checked size, a graph
    break's outcome, a bounds check, a lifted loop, an eager op, a scan): -1
    when only the checks of the inputs may, None when nothing may."""
    made = {vid: k for k, st in enumerate(steps) for vid in step_io(st)[1]}
    at = [made.get(o.payload[0], -1) for o in outputs if o.kind == "check"]
    at += [made.get(d.value_id, len(steps) - 1) for d in dd_dims]
    at += [len(steps) - 1] if dd_checks and not dd_dims else []
    at += [k for k, st in enumerate(steps) if (ERRCELL in st.args or bool(st.lifted) if isinstance(st, KernelCall)
                                               else st.op in ("eager", "scan") or _may_raise(st))]
    return max(at) if at else None


# numpy steps that raise on some values (LinAlgError of a singular matrix): the call then runs in numpy
# (jit/eager.py after_failure), on the arguments as they were -- no write into one before such a step
_RAISING = frozenset({"cholesky", "inv", "solve", "ufunc_at"})


def _may_raise(st: Node) -> bool:
    """Whether numpy's step may raise on the call's values: an index array
    out of bounds (x[idx], np.take_along_axis, x[idx] = v, np.add.at), a
    singular matrix."""
    return st.op in _RAISING or OPS[st.op].category == GATHER or st.op == "setitem" and any(
        it[0] == "array" for it in st.attr("items"))


def last_reads(steps, keep) -> tuple[dict[int, int], dict[int, list[int]]]:
    """(the last step reading each value; step index -> the values last
    read there, but those in `keep`)."""
    last_use: dict[int, int] = {}
    for k, st in enumerate(steps):
        for vid in step_io(st)[0]:
            last_use[vid] = k
    dead_after: dict[int, list[int]] = {}
    for vid, k in last_use.items():
        if vid not in keep:
            dead_after.setdefault(k, []).append(vid)
    return last_use, dead_after


def kept(outputs) -> set:
    """Values the call returns or writes back (and the arguments written
    into, or returned a view of)."""
    keep = {o.value_id for o in outputs if o.value_id is not None}
    return keep | {o.payload[0] for o in outputs if o.kind in ("writeback", "view")}


def plan_buffers(graph, steps, outputs, pooled, stop: int | None) -> BufferPlan:
    """The plan of an executable whose call may stop midway up to step `stop` (last_stop)."""
    # free each intermediate after its last use, as eager numpy would: keeping
    # them alive until return raises the peak and makes malloc fault in pages
    last_use, dead_after = last_reads(steps, kept(outputs))
    roots_owned = _roots(graph, steps)
    in_place = _in_place_updates(steps, outputs, -1 if stop is None else stop, roots_owned)
    views = _slot_views(steps)
    direct = _stores_in_place(steps, in_place, pooled, last_use, roots_owned[0], views, kept(outputs))
    into_operand = _updates_in_place(steps, in_place, outputs, views)
    stored = {steps[k + 1].out.id for k in into_operand}
    into_argument = _writes_into_arguments(graph, steps, outputs, roots_owned[0], -1 if stop is None else stop)
    return BufferPlan(last_use, dead_after, in_place, direct, into_operand, stored, into_argument)



# ops whose output may share memory with their (first) operand
_ALIASING = ops_returning(VIEW_OF_INPUT)
_EXTERNAL = ops_returning(EXTERNAL)


def _in_place_updates(steps, outputs, stop: int, roots_owned) -> set[int]:
    """Output ids of the setitem steps (and numpy's updates, np.put,
    np.fill_diagonal: NUMPY_UPDATES) that may write into their target's
    buffer instead of a copy: the target's memory was made by this
    executable (not a captured array or an eager op's result, which may be
    a view of anything), or is an argument the call writes back into anyway,
    the write after the last step that may stop the call (`stop`: the caller
    then runs numpy, or another entry, on the arguments as they were), and
    no later step, output or write-back reads it, or a view of it, again."""
    roots, owned = roots_owned
    written = {o.payload[0] for o in outputs if o.kind == "writeback"}
    reads = [step_io(st)[0] for st in steps]
    # the buffers read from step k on (and by the outputs), built from the end
    read_later: set = set().union(*(roots.get(o.value_id, frozenset()) for o in outputs if o.value_id is not None))
    out = set()
    for k in range(len(steps) - 1, -1, -1):
        st = steps[k]
        update = not isinstance(st, KernelCall) and st.op == "np_update" and st.attr("fn") in NUMPY_UPDATES
        if isinstance(st, KernelCall) and st.target or not isinstance(st, KernelCall) and st.op == "setitem" \
                or update:  # (numpy's update may raise halfway, np.put's index: into a buffer of this call's only)
            target = roots.get(step_io(st)[0][0], frozenset())
            if target and target <= (owned | written if k > stop and not update else owned) \
                    and not (read_later & target):
                out.add(step_io(st)[1][0])
        for vid in reads[k]:
            read_later |= roots.get(vid, frozenset())
    return out


def _roots(graph, steps) -> tuple[dict[int, frozenset], set[int]]:
    """(the buffers each value may be a view of, by value id: values that
    made their own; those made by this executable)."""
    roots: dict[int, frozenset] = {v.id: frozenset([v.id]) for v in graph.inputs}
    owned: set[int] = set()
    for st in steps:
        ins, outs = step_io(st)
        for vid in outs:
            if isinstance(st, KernelCall) or st.op not in _ALIASING | _EXTERNAL:
                roots[vid] = frozenset([vid])
                owned.add(vid)
            elif st.op in _ALIASING:
                roots[vid] = roots.get(ins[0], frozenset([vid]))
            else:
                roots[vid] = frozenset([vid]).union(*(roots.get(i, frozenset()) for i in ins))
    return roots, owned


def _stores_in_place(steps, in_place: set[int], pooled, last_use, roots, views, keep: set) -> dict[int, Node]:
    """Kernel outputs that a kernel may write straight into the slot of an
    in-place setitem (the step right after it) instead of a new array: its
    only reader, with the slot's shape and dtype, a basic index, and no
    operand of the kernel a view of the target other than the slot itself,
    read by a pointwise kernel (`B[i] += y`: each element is read where it
    is written; another view, `A[i, 1:-1] += A[i, 2:]`, or a product,
    `X[:4] = X[:4] @ W`, would read what the kernel wrote).  By output id:
    the setitem."""
    out = {}
    for k, (st, nxt) in enumerate(zip(steps, steps[1:])):
        if not (isinstance(st, KernelCall) and not st.target and not st.lifted and len(st.outputs) == 1
                and not isinstance(nxt, KernelCall)
                and nxt.op == "setitem" and nxt.out.id in in_place and len(nxt.inputs) == 2):
            continue
        vid, shape, dtype = st.outputs[0]
        # (not one the call returns: `out[0] = h; return h` -- numpy's h is an array of its own, not a view
        # of out that the caller's later writes into out would change)
        if (nxt.inputs[1].id != vid or vid in pooled or vid in keep or last_use.get(vid) != k + 1 or not shape
                or _slot_shape(nxt.attr("items"), nxt.inputs[0].shape) != tuple(shape)
                or np.dtype(dtype) != nxt.out.dtype):
            continue
        target = roots.get(nxt.inputs[0].id, frozenset())
        if target and all(not (roots.get(i, frozenset([i])) & target)
                          or st.pointwise and _is_slot(i, nxt, views) and views[i].out.shape == tuple(shape)
                          for i in st.inputs):
            out[vid] = nxt
    return out


def _writes_into_arguments(graph, steps, outputs, roots, stop: int) -> dict[int, int]:
    """Kernel outputs the call writes back into an argument (`C *= beta;
    C += alpha * A @ B`: its one epilogue kernel makes C's new value) that
    the kernel may write straight into that argument instead of a new array
    copied in at the end: a pointwise kernel of one output, the argument's
    shape and dtype, reading the argument only as itself (where it writes
    the same element) and no other view of it, with no later step reading
    the argument, and the output returned as nothing else.  (Only after the
    last step that may stop the call, `stop`: it then runs in numpy on the
    arguments as they were; another argument aliasing the target sends the
    call to numpy before any step: generate.py _alias_checks.)  By output
    id: the argument's."""
    targets = {o.payload[1]: o.payload[0] for o in outputs if o.kind == "writeback" and o.payload[0] != o.payload[1]}
    returned = {o.value_id for o in outputs if o.kind != "writeback"}
    args = {v.id: v for v in graph.inputs}
    out = {}
    for k, st in enumerate(steps):
        if not (k > stop and isinstance(st, KernelCall) and st.pointwise and not st.target and not st.lifted
                and len(st.outputs) == 1):
            continue
        vid, shape, dtype = st.outputs[0]
        target = args.get(targets.get(vid))
        if target is None or vid in returned or tuple(shape) != target.shape or np.dtype(dtype) != target.dtype:
            continue
        buffer = roots.get(target.id, frozenset([target.id]))
        if any(i != target.id and roots.get(i, frozenset([i])) & buffer for i in st.inputs):
            continue
        if any(roots.get(i, frozenset([i])) & buffer for later in steps[k + 1:] for i in step_io(later)[0]):
            continue
        out[vid] = target.id
    return out


def _slot_views(steps) -> dict[int, Node]:
    """The values made by a basic getitem (ints and slices: a view), by
    value id: the getitem."""
    return {st.out.id: st for st in steps if not isinstance(st, KernelCall) and st.op == "getitem"
            and all(it[0] in ("int", "slice") for it in st.attr("items"))}


def _is_slot(vid: int, setitem: Node, views: dict[int, Node]) -> bool:
    """Whether value `vid` is the view `setitem` writes: its target's, at its index."""
    g = views.get(vid)
    return g is not None and g.inputs[0].id == setitem.inputs[0].id and g.attr("items") == setitem.attr("items")


def _updates_in_place(steps, in_place: set[int], outputs, views) -> dict[int, int]:
    """numpy ufunc steps that may compute into one of their operands: the
    operand is a basic-index view x[idx] read for this step only, and the
    step's result is read only by the in-place setitem right after it that
    stores back into x[idx] (`x[idx] op= y`, functionalized).  The step
    then runs as numpy's own augmented assignment does, `op(x[idx], y,
    out=x[idx])`, and the setitem has nothing left to copy.  By step index:
    the operand's value id."""
    uses: dict[int, int] = {}
    for st in steps:
        for vid in step_io(st)[0]:
            uses[vid] = uses.get(vid, 0) + 1
    for o in outputs:
        for vid in (o.value_id, o.payload[0] if o.kind == "writeback" else None):
            if vid is not None:
                uses[vid] = uses.get(vid, 0) + 2
    out = {}
    for k, (st, nxt) in enumerate(zip(steps, steps[1:])):
        if (isinstance(st, KernelCall) or isinstance(nxt, KernelCall) or nxt.op != "setitem"
                or nxt.out.id not in in_place or len(nxt.inputs) != 2 or nxt.inputs[1].id != st.out.id
                or uses.get(st.out.id) != 1 or st.attrs or not isinstance(OPS[st.op].ref, np.ufunc)
                or len(st.outputs) != 1):
            continue
        for v in st.inputs:
            if (_is_slot(v.id, nxt, views) and uses.get(v.id) == 1 and v.ndim >= 1 and v.shape == st.out.shape
                    and v.dtype == st.out.dtype == nxt.out.dtype):
                out[k] = v.id
                break
    return out


def _slot_shape(items, shape) -> tuple | None:
    """The shape x[items] has, for ints and slices (None for other items)."""
    out = []
    for it in items:
        if it[0] == "slice":
            out.append(it[3])
        elif it[0] != "int":
            return None
    return tuple(out) + tuple(shape[len(items):])



_NOT_ALLOCATED = _ALIASING | _EXTERNAL  # (the memory model counts what the executable allocates)


MAX_PEAK_TERMS = 64  # distinct symbolic live-byte sums the memory model keeps before it bounds them


def memory_model(steps, outputs, symbols, pooled) -> str:
    """The source of a function of the bound dims giving (bytes allocated per
    call, peak live bytes of a call): sizes of the arrays the steps create,
    pooled buffers counted as live but not as allocated.  Sizes that depend
    on data-dependent dims (eager ops) are left out."""
    sizes: dict[int, object] = {}
    allocated_int, allocated_sym = 0, []  # (summed once at the end: a growing sympy sum is quadratic)
    bound = set(symbols)
    for st in steps:
        made = ([(vid, shp, dt) for vid, shp, dt in st.outputs] if isinstance(st, KernelCall) else
                [] if st.op in _NOT_ALLOCATED else [(o.id, o.shape, o.dtype) for o in st.outputs])
        for vid, shp, dt in made:
            n = np.dtype(dt).itemsize  # (static sizes stay Python ints: no sympy per step)
            for d in shp:
                n = n * d
            if isinstance(n, sympy.Basic):
                if n.free_symbols - bound:
                    continue
                n = int(n) if n.is_Integer else n
            sizes[vid] = n
            if vid not in pooled:
                if isinstance(n, int):
                    allocated_int += n
                else:
                    allocated_sym.append(n)
    allocated = sympy.Add(allocated_int, *allocated_sym)
    dead_at = last_reads(steps, kept(outputs))[1]
    # the symbolic live bytes as a multiset of sizes (no sympy per step: an
    # unrolled loop has tens of thousands of steps)
    live_int, live_sym, peaks, top_int = 0, {}, {}, 0
    for k, st in enumerate(steps):
        for vid in step_io(st)[1]:
            n = sizes.get(vid, 0)
            if isinstance(n, int):
                live_int += n
            else:
                live_sym[n] = live_sym.get(n, 0) + 1
        if not live_sym:
            top_int = max(top_int, live_int)
        elif peaks is not None:
            peaks.setdefault((live_int, frozenset(live_sym.items())), None)
            if len(peaks) > MAX_PEAK_TERMS:  # (an unrolled loop): every size at once bounds the peak
                peaks = None
        for vid in dead_at.get(k, ()):
            n = sizes.get(vid, 0)
            if isinstance(n, int):
                live_int -= n
            elif live_sym[n] == 1:
                del live_sym[n]
            else:
                live_sym[n] -= 1
    peaks = None if peaks is None else {
        sympy.expand(sympy.Add(live, *(c * n for n, c in terms))): None for live, terms in peaks}
    # max() in Python: a sympy Max of many terms spends seconds simplifying
    if peaks is None:
        peaks = {sympy.expand(sympy.Add(*sizes.values())): None}
    uniq = [sympy.Integer(top_int)] + list(peaks)
    return exprs_source([sympy.expand(allocated)] + uniq, symbols)


def memory_function(source: str):
    sizes_fn = compile_source(source)

    def memory(*dims):
        r = sizes_fn(*dims)
        return r[0], max(r[1:])
    return memory

"""The Executable: a graph turned into one Python function that runs its
steps in order, both back ends': a step is a compiled kernel, a product (our
GEMM or numpy's matmul, chosen per shape: runtime/gemmchoice.py), a
re-rolled or lifted loop, or the op's numpy reference implementation.  With
no compiled function (backend="reference") every step is the latter: the
oracle the compiled back end is tested against.

Hot path: the generated function unpacks inputs and bound dims, runs the
steps, and returns the flat outputs; no sympy, no dict lookups per node.
"""
from __future__ import annotations

import ctypes
import dataclasses
import operator
import struct
import threading
import time
from dataclasses import dataclass

import numpy as np
import sympy

from shapes.ir import ArrayConst, Graph, Node
from shapes.ops import EXTERNAL, FRESH, FRESH_C, OPS, VIEW_OF_INPUT, index_of, ops_returning
from shapes.pyloop import ABORTS
from shapes.pyexpr import compile_source, exprs_source, ident, to_python
from runtime import gemmchoice, gemv
from runtime.bufferpool import BufferPool
from runtime.threadpool import dgemv_address, native_pool, parallel_for


@dataclass(frozen=True)
class OutputSpec:
    kind: str      # "value" | "const" | "dim" | "writeback" | "check"
    payload: object  # value id | the object | sympy expr | (input value id, value id written into it)
                     # | (value id, kind, outcome): a graph break's outcome, checked at run time

    @property
    def value_id(self) -> int | None:
        """The graph value this output returns (writes back, checks), if any."""
        if self.kind == "value":
            return self.payload
        return self.payload[1] if self.kind == "writeback" else self.payload[0] if self.kind == "check" else None


class RunEagerly(Exception):
    """This call cannot run on the executable (the caller runs it in numpy)."""
    reason = "eager"


class ShapeMismatch(RunEagerly):
    """An eager op's output did not have the size the trace relied on."""
    reason = "eager_size_changed"


class BreakMismatch(RunEagerly):
    """A graph break's value decides otherwise than on the traced call: this
    entry does not serve the call (another entry, or a new trace, does)."""
    reason = "graph_break"


class LoopAbort(RunEagerly):
    """A lifted loop met what Python or numpy raises or warns about (an
    index out of range, an overflow, a division by zero): numpy runs the
    call and does so."""
    reason = "lifted_loop"


class Aliased(RunEagerly):
    """An argument the function writes into shares memory with another
    argument: the functionalized graph would not see the write through it."""
    reason = "aliased_arguments"


@dataclass(frozen=True)
class DataDependentDim:
    value_id: int
    axis: int
    symbol: sympy.Symbol
    expr: object  # what the trace relied on: the symbol itself when free


@dataclass(frozen=True)
class KernelCall:
    """One native kernel call: plain data from codegen's ABI."""
    symbol: str
    inputs: tuple          # value ids read
    outputs: tuple         # (value id, shape, dtype) of each array it writes
    args: tuple            # ("array", value id) | ("int", expr) | ("float", value id)
    rows: object           # the [0, rows) range split across threads
    inner: object          # elements per row
    prepare: tuple = ()    # (value id, (batch, rows, cols) exprs, unit_rows_ok): passed as a 4-D
                           # view with unit-stride columns (or rows), or a copy when there is none
    parallel: str | None = None  # the kernel's parallel entry: its arguments with (chunk, native
                                 # pool address) after the ints, run on the native pool
    blas: tuple = ()       # a product's (A value id, B value id, (M, N, K) exprs): numpy's matmul of
                           # A and B computes the same output; runtime/gemmchoice.py picks one per host
    pointwise: bool = False  # an operand of the output's shape is read only where the output is written
                             # (a fused loop kernel; not a product, whose C[i, j] reads all of A's row i)
    target: bool = False   # a re-rolled loop: it updates its first input (in place when that is dead,
                           # else a copy) into its one output, its trips [0, rows) in order on this thread
    lifted: tuple = ()     # a lifted Python loop: (input ids of the arrays it stores into, whose
                           # copies are its first outputs; (value id, type) of each scalar input;
                           # (value id, type) of each scalar output) (run_lifted)
    tile: str = ""         # a kernel's tile entry, when a product's GEMM runs it in its store
    epilogue: "KernelCall | None" = None  # a product's: that kernel (its inputs and outputs are the
                                          # step's too; the GEMM's last two ints address it)

    def with_epilogue(self, k: "KernelCall") -> "KernelCall":
        """This product with kernel `k` run in its store (k.tile): its last two
        ints, 0 without an epilogue, become the tile entry's address and its
        packed arguments (codegen/gemm.py ABI)."""
        # (the product stays among the inputs: the epilogue reads it within the step, which is its last use:
        # a pooled buffer, freed after the step)
        ins = self.inputs + tuple(i for i in k.inputs if i not in self.inputs)
        return dataclasses.replace(self, inputs=ins, outputs=self.outputs + k.outputs, epilogue=k,
                                   args=self.args[:-2] + (("int", "epilogue"), ("int", "epilogue_args")))


# Work (elements) below which a kernel runs on the calling thread, and the
# least work per chunk when it is split: a fork/join costs ~0.5 us on the
# native pool, ~30 us on the Python one.
PARALLEL_MIN_WORK, CHUNK_MIN_WORK = 1 << 14, 1 << 12          # native pool
PY_PARALLEL_MIN_WORK, PY_CHUNK_MIN_WORK = 1 << 17, 1 << 15    # Python pool


@dataclass(frozen=True)
class PortableExecutable:
    """An Executable as plain data, for another process: the generated
    source, how to rebuild each constant it names, and the memory model's
    source.  Rebuilding it needs no graph and no sympy."""
    source: str
    consts: dict          # name -> ("value", obj) | ("op", op name) | ("kernel", symbol) | ("address", symbol) | ("gemv",) | ("pool",)
    memory_source: str


class Executable:
    """`steps` are graph Nodes (run with their numpy reference) and
    KernelCalls (run natively through `functions[symbol]`).  `products`:
    how its last call ran each product that had the choice, by output value
    id: True numpy's matmul, False the GEMM kernel, None both (measured)."""

    def __init__(self, graph: Graph, symbols: list, outputs: list[OutputSpec],
                 dd_dims: list[DataDependentDim], steps: list | None = None,
                 functions: dict | None = None, keepalive=None, dd_checks=()):
        self.graph = graph
        self.symbols = list(symbols)
        self.outputs = outputs
        self.steps = list(graph.nodes) if steps is None else steps
        self.keepalive = keepalive  # the loaded object code the functions live in
        self.pool = BufferPool()
        pooled = _poolable(self.steps, outputs) if steps is not None else set()
        source, ns, consts = _generate(graph, self.steps, self.symbols, outputs, dd_dims, functions or {},
                                       self.pool, pooled, dd_checks)
        self.run = ns["run"]
        self.products = ns["_last"]
        memory_source = _memory_model(self.steps, outputs, self.symbols, pooled)
        self.memory = _memory_function(memory_source)
        self.portable = PortableExecutable(source, consts, memory_source)

    @property
    def source(self) -> str:
        return self.portable.source

    @classmethod
    def from_portable(cls, p: PortableExecutable, functions: dict, keepalive=None) -> "Executable":
        """The Executable another process built (graph, steps and outputs are
        not kept: explain() reads them from the saved trace)."""
        self = cls.__new__(cls)
        self.graph = self.outputs = None
        self.symbols, self.steps = [], []
        self.keepalive = keepalive
        self.pool = BufferPool()
        ns = _base_namespace(self.pool)
        for name, recipe in p.consts.items():
            ns[name] = _rebuild_const(recipe, functions)
        exec(compile(p.source, "<shapejit executable>", "exec"), ns)
        self.run = ns["run"]
        self.products = ns["_last"]
        self.memory = _memory_function(p.memory_source)
        self.portable = p
        return self


def _step_io(s):
    if isinstance(s, KernelCall):
        return list(s.inputs), [o[0] for o in s.outputs]
    return [v.id for v in s.inputs], [o.id for o in s.outputs]


# view ops run as the array's method, with the attribute that is its one argument
_METHODS = {"reshape": "shape", "transpose": "perm"}

# ops whose result is a new array (never a view of an operand, nor its buffer)
_FRESH = ops_returning(FRESH, FRESH_C)


def _poolable(steps, outputs) -> set[int]:
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
        for vid in _step_io(st)[0]:
            fine = isinstance(st, KernelCall) or st.op in _FRESH
            ok[vid] = ok.get(vid, True) and fine
    return {v for v in cands if v not in out_ids and ok.get(v, False)}


def _base_namespace(pool) -> dict:
    return {"ShapeMismatch": ShapeMismatch, "Aliased": Aliased, "_shape": np.shape, "_empty": np.empty,
            "_par": parallel_for, "_check_bounds": _check_bounds, "_errcell": _errcell_address, "_pool": pool,
            "_matmul": np.matmul, "_item": _item, "_rows4": _rows4, "_copyto": np.copyto,
            "_WARMUP": _WARMUP, "_maximum": _maximum, "_minimum": _minimum,
            "_aliased": _aliased, "_slice": _slice, "_copy": _copy, "BreakMismatch": BreakMismatch,
            "_outcome": OUTCOME, "_same": _same, "_gemm_best": gemmchoice.BEST,
            "_gemm_class": gemmchoice.shape_class, "_gemm_decide": gemmchoice.decide,
            "_ROUNDS": range(gemmchoice.ROUNDS), "_clock": time.perf_counter, "_run_lifted": run_lifted,
            "_epilogue_args": _epilogue_args, "_addressof": ctypes.addressof, "_last": {},
            "_gemv_parts": gemv.parts, "_gemv_split": gemv.split}


# how Python reads a traced value at a graph break (jit/tracer.py takes the same)
OUTCOME = {"bool": bool, "float": float, "int": int, "index": operator.index, "item": lambda x: x.item()}


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)  # NaN decides as NaN did


# CPython 3.11 specializes a function's bytecode (LOAD_GLOBAL from a dict,
# BINARY_SUBSCR of an array...) only after 8 calls or backward jumps: an
# executable runs every line once a call, so an unrolled loop's thousands of
# steps ran unspecialized (~40% slower) for its first 8 calls.  A loop of 8
# empty turns at the top makes the first call specialize.  (3.12 and later
# specialize from the start.)  The loop costs ~0.2 us a call: only
# executables of WARMUP_STEPS steps or more (an unrolled loop, milliseconds a
# call) have it; a short one reaches its 8 calls soon enough.
_WARMUP = range(8)
WARMUP_STEPS = 64


def _maximum(a, b):
    """np.maximum of two 0-d values of one dtype: two numpy scalars (a
    loop's `np.maximum(t[i, j - 1], t[i + 1, j])`) are picked without a
    ufunc call by numpy's own rule (b on a tie, so -0.0 and 0.0 come out as
    numpy's; a NaN propagates); anything else goes to numpy."""
    if type(a) is type(b) and isinstance(a, np.generic):
        return a if a > b or a != a else b
    return np.maximum(a, b)


def _minimum(a, b):
    """np.minimum as _maximum."""
    if type(a) is type(b) and isinstance(a, np.generic):
        return a if a < b or a != a else b
    return np.minimum(a, b)


# (not power: ndarray's ** takes np.square for an exponent of 2, another dtype for bools)
_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "floor_divide": "//",
              "remainder": "%", "less": "<", "less_equal": "<=", "greater": ">",
              "greater_equal": ">=", "equal": "==", "not_equal": "!="}


# Python's operators on Python ints (weak int operands): exact where numpy's int64 would wrap
_PY_OPERATORS = {"add": "{} + {}", "subtract": "{} - {}", "multiply": "{} * {}", "floor_divide": "{} // {}",
                 "remainder": "{} % {}", "bitwise_and": "{} & {}", "bitwise_or": "{} | {}",
                 "bitwise_xor": "{} ^ {}", "left_shift": "{} << {}", "right_shift": "{} >> {}",
                 "invert": "~{}", "negative": "-{}"}


def _index_source(items, arrays: list[str], const) -> str:
    """Python source of the numpy index of normalized items (shapes/indexing.py
    and ("array", k): the k-th of `arrays`): a constant when nothing in it
    changes from call to call."""
    if not arrays and not _has_sym(items):
        idx = index_of(items, ())
        return const(idx[0] if len(idx) == 1 else idx)  # (x[5], not x[(5,)]: numpy's faster path)
    parts = []
    for it in items:
        if it[0] == "array":
            parts.append(arrays[it[1]])
        elif it[0] == "int":
            parts.append(to_python(it[1]) if isinstance(it[1], sympy.Basic) else str(it[1]))
        elif it[0] == "new":
            parts.append("None")
        elif not _has_sym(it):
            parts.append(const(index_of((it,), ())[0]))
        else:
            _, start, step, length = it
            parts.append(f"_slice({to_python(sympy.sympify(start))}, {step}, {to_python(sympy.sympify(length))})")
    return parts[0] if len(parts) == 1 else "(" + "".join(p + ", " for p in parts) + ")"


def _symbols_of(items) -> set:
    return set().union(*(x.free_symbols for it in items for x in it if isinstance(x, sympy.Basic)))


def _slice(start: int, step: int, length: int) -> slice:
    stop = start + step * length  # (as shapes/ops.py index_from_items)
    return slice(start, None if stop < 0 else stop, step)


def _copy(x):
    return np.array(x, copy=True)


def _aliased(x, others) -> bool:
    return any(np.may_share_memory(x, o) for o in others)


# ops whose output may share memory with their (first) operand
_ALIASING = ops_returning(VIEW_OF_INPUT)
_EXTERNAL = ops_returning(EXTERNAL)


def _in_place_updates(steps, outputs, may_stop: bool, roots_owned) -> set[int]:
    """Output ids of the setitem steps that may write into their target's
    buffer instead of a copy: the target's memory was made by this
    executable (not a captured array or an eager op's result, which may be
    a view of anything), or is an argument the call writes back into anyway
    when no step after the first write can stop the call (the caller then
    runs numpy on the arguments as they were), and no later step, output or
    write-back reads it, or a view of it, again."""
    roots, owned = roots_owned
    if not may_stop:
        owned = owned | {o.payload[0] for o in outputs if o.kind == "writeback"}
    reads = [_step_io(st)[0] for st in steps]
    # the buffers read from step k on (and by the outputs), built from the end
    read_later: set = set().union(*(roots.get(o.value_id, frozenset()) for o in outputs if o.value_id is not None))
    out = set()
    for k in range(len(steps) - 1, -1, -1):
        st = steps[k]
        if isinstance(st, KernelCall) and st.target or not isinstance(st, KernelCall) and st.op == "setitem":
            target = roots.get(_step_io(st)[0][0], frozenset())
            if target and target <= owned and not (read_later & target):
                out.add(_step_io(st)[1][0])
        for vid in reads[k]:
            read_later |= roots.get(vid, frozenset())
    return out


def _roots(graph, steps) -> tuple[dict[int, frozenset], set[int]]:
    """(the buffers each value may be a view of, by value id: values that
    made their own; those made by this executable)."""
    roots: dict[int, frozenset] = {v.id: frozenset([v.id]) for v in graph.inputs}
    owned: set[int] = set()
    for st in steps:
        ins, outs = _step_io(st)
        for vid in outs:
            if isinstance(st, KernelCall) or st.op not in _ALIASING | _EXTERNAL:
                roots[vid] = frozenset([vid])
                owned.add(vid)
            elif st.op in _ALIASING:
                roots[vid] = roots.get(ins[0], frozenset([vid]))
            else:
                roots[vid] = frozenset([vid]).union(*(roots.get(i, frozenset()) for i in ins))
    return roots, owned


def _stores_in_place(steps, in_place: set[int], pooled, last_use, roots, views) -> dict[int, Node]:
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
        if (nxt.inputs[1].id != vid or vid in pooled or last_use.get(vid) != k + 1 or not shape
                or _slot_shape(nxt.attr("items"), nxt.inputs[0].shape) != tuple(shape)
                or np.dtype(dtype) != nxt.out.dtype):
            continue
        target = roots.get(nxt.inputs[0].id, frozenset())
        if target and all(not (roots.get(i, frozenset([i])) & target)
                          or st.pointwise and _is_slot(i, nxt, views) and views[i].out.shape == tuple(shape)
                          for i in st.inputs):
            out[vid] = nxt
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
        for vid in _step_io(st)[0]:
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


def _rebuild_const(recipe: tuple, functions: dict):
    kind = recipe[0]
    if kind == "value":
        return recipe[1]
    if kind == "op":
        return OPS[recipe[1]].ref
    if kind == "kernel":
        return functions[recipe[1]]
    if kind == "address":
        return _address(functions[recipe[1]])
    if kind == "gemv":
        return dgemv_address()
    if kind == "pool":
        address = native_pool()
        if address is None:
            raise RuntimeError("shapejit: this executable runs kernels on the native thread pool, which is not running")
        return address
    raise ValueError(f"unknown constant recipe {recipe!r}")


def _generate(graph, steps, symbols, outputs, dd_dims, functions, pool, pooled, dd_checks=()):
    """-> (source, namespace, consts): consts says how to rebuild each
    constant the source names (PortableExecutable)."""
    ns = _base_namespace(pool)
    names: dict[int, str] = {}
    consts: dict[int, str] = {}
    recipes: dict[str, tuple] = {}

    def const(obj, recipe: tuple | None = None) -> str:
        key = id(obj)
        if key not in consts:
            consts[key] = f"_k{len(consts)}"
            ns[consts[key]] = obj
            recipes[consts[key]] = recipe or ("value", obj)
        return consts[key]

    def attr_src(a) -> str:
        if isinstance(a, sympy.Basic):
            return to_python(a)
        if type(a) is tuple and _has_sym(a):
            return "(" + "".join(attr_src(x) + ", " for x in a) + ")"
        return const(a)

    lines = ["def run(inputs, dims):"] + (["    for _ in _WARMUP: pass"] if len(steps) >= WARMUP_STEPS else [])
    for k, v in enumerate(graph.inputs):
        names[v.id] = f"v{v.id}"
    if graph.inputs:
        lines.append("    " + "".join(f"{names[v.id]}, " for v in graph.inputs) + "= inputs")
    if symbols:
        lines.append("    " + "".join(f"{ident(s)}, " for s in symbols) + "= dims")
    head = len(lines)
    hoisted: dict[str, str] = {}  # index source of the input dims only -> the name it is computed into once

    input_dims = frozenset(symbols)

    def index_src(items, arrays) -> str:
        src = _index_source(items, arrays, const)
        if arrays or not _symbols_of(items) <= input_dims or src.startswith("_k"):
            return src
        return hoisted.setdefault(src, f"_ix{len(hoisted)}")
    # free each intermediate after its last use, as eager numpy would: keeping
    # them alive until return raises the peak and makes malloc fault in pages
    last_use: dict[int, int] = {}
    for k, st in enumerate(steps):
        for vid in _step_io(st)[0]:
            last_use[vid] = k
    keep = {o.value_id for o in outputs if o.value_id is not None}
    keep |= {o.payload[0] for o in outputs if o.kind == "writeback"}
    dead_after: dict[int, list[int]] = {}
    for vid, k in last_use.items():
        if vid not in keep:
            dead_after.setdefault(k, []).append(vid)
    dd_by_value: dict[int, list[DataDependentDim]] = {}
    for d in dd_dims:
        dd_by_value.setdefault(d.value_id, []).append(d)
    writebacks = [o.payload for o in outputs if o.kind == "writeback" and o.payload[0] != o.payload[1]]
    if writebacks:  # the graph does not see a write through an aliasing argument: numpy must run it
        arrays = [v for v in graph.inputs if not v.weak]
        checked: set[int] = set()
        for target, _ in writebacks:
            checked.add(target)  # (a pair of targets is checked once)
            others = "".join(names[v.id] + ", " for v in arrays if v.id not in checked)
            if others:
                lines.append(f"    if _aliased({names[target]}, ({others})): raise Aliased({names[target]!r})")
    may_stop = bool(dd_checks or dd_dims or any(o.kind == "check" for o in outputs)) or any(
        ("int", "errcell") in st.args or bool(st.lifted) if isinstance(st, KernelCall) else st.op == "eager"
        for st in steps)
    roots_owned = _roots(graph, steps)
    in_place = _in_place_updates(steps, outputs, may_stop, roots_owned)
    views = _slot_views(steps)
    direct = _stores_in_place(steps, in_place, pooled, last_use, roots_owned[0], views)
    into_operand = _updates_in_place(steps, in_place, outputs, views)
    stored = {steps[k + 1].out.id for k in into_operand}  # (setitems whose value is already in place)
    bound, pending = set(symbols), list(dd_checks)
    checks: dict[int, list[tuple]] = {}  # value id -> the graph breaks it decides, checked once it exists
    for o in outputs:
        if o.kind == "check":
            checks.setdefault(o.payload[0], []).append(o.payload[1:])

    def check_lines(vids) -> list[str]:
        return [f"    if not _same(_outcome[{kind!r}]({names[vid]}), {const(outcome)}): raise BreakMismatch()"
                for vid in vids for kind, outcome in checks.get(vid, ())]
    lines += check_lines([v.id for v in graph.inputs])
    n_head = len(lines)
    for k, n in enumerate(steps):
        if k - 1 in dead_after:
            lines.append("    del " + ", ".join(names[i] for i in sorted(set(dead_after[k - 1]))))
        if k and checks:
            lines += check_lines(_step_io(steps[k - 1])[1])
        if isinstance(n, KernelCall):
            into = {vid: f"{names[st.inputs[0].id]}[{index_src(st.attr('items'), [])}]"
                    for vid, _, _ in n.outputs if (st := direct.get(vid)) is not None}
            if n.target:
                lines += _loop_lines(n, names, const, functions, n.outputs[0][0] in in_place)
            elif n.lifted:
                lines += _lifted_lines(n, names, const, functions)
            else:
                lines += _kernel_lines(n, names, const, functions, pooled, into)
            continue
        if n.out.id in pooled:  # matmul into a pooled buffer
            names[n.out.id] = f"v{n.out.id}"
            shp = "(" + "".join(to_python(d) + ", " for d in n.out.shape) + ")"
            lines.append(f"    v{n.out.id} = _pool.get(_b, {n.out.id}, {shp}, {const(n.out.dtype)})")
            lines.append(f"    _matmul({names[n.inputs[0].id]}, {names[n.inputs[1].id]}, out=v{n.out.id})")
            continue
        for o in n.outputs:
            names[o.id] = f"v{o.id}"
        outs = ", ".join(names[o.id] for o in n.outputs)
        args = ", ".join(names[v.id] for v in n.inputs)
        if n.op == "const":
            value = n.attr("value")
            lines.append(f"    {outs} = {const(value.array if isinstance(value, ArrayConst) else value)}")
            continue
        if n.op == "dim":
            lines.append(f"    {outs} = {to_python(n.attr('expr'))}")
            continue
        if n.op in ("getitem", "index", "setitem"):  # numpy indexing inline: no index rebuilt per call
            arrays = [names[v.id] for v in n.inputs[2 if n.op == "setitem" else 1:]]
            idx = index_src(n.attr("items"), arrays)
            x = names[n.inputs[0].id]
            if n.op != "setitem":
                lines.append(f"    {outs} = {x}[{idx}]")
            elif n.inputs[1].id in direct:  # (the kernel wrote it there unless the slot was strided)
                v = names[n.inputs[1].id]
                lines.append(f"    if {v} is not _t{n.inputs[1].id}: {x}[{idx}] = {v}")
                lines.append(f"    {outs} = {x}; del _t{n.inputs[1].id}")
            elif n.out.id in stored:
                lines.append(f"    {outs} = {x}")
            elif n.out.id in in_place:
                lines.append(f"    {x}[{idx}] = {names[n.inputs[1].id]}; {outs} = {x}")
            else:
                lines.append(f"    {outs} = _copy({x}); {outs}[{idx}] = {names[n.inputs[1].id]}")
            continue
        if k in into_operand:  # (x[idx] op= y: into the view of the slot, as numpy's own)
            lines.append(f"    {outs} = {const(OPS[n.op].ref, ('op', n.op))}({args}, out={names[into_operand[k]]})")
            continue
        if n.op in _OPERATORS and len(n.inputs) == 2 and not all(v.weak for v in n.inputs):
            # (numpy's own operator: the same ufunc, but numpy scalars take their fast path)
            a, b = (names[v.id] for v in n.inputs)
            lines.append(f"    {outs} = {a} {_OPERATORS[n.op]} {b}")
            continue
        if n.op in _PY_OPERATORS and all(v.weak and v.dtype.kind in "iu" for v in n.inputs):
            # (Python ints: Python's own operators, as the function's own code computes them)
            lines.append(f"    {outs} = " + _PY_OPERATORS[n.op].format(*(names[v.id] for v in n.inputs)))
            continue
        if (n.op in ("maximum", "minimum") and n.out.ndim == 0
                and all(v.ndim == 0 and not v.weak and v.dtype == n.out.dtype for v in n.inputs)):
            lines.append(f"    {outs} = _{n.op}({args})")  # (scalars picked without a ufunc call)
            continue
        if n.op in _METHODS and not n.inputs[0].weak:  # (an array's own method: no numpy function dispatch)
            lines.append(f"    {outs} = {args}.{n.op}({attr_src(n.attr(_METHODS[n.op]))})")
            continue
        fn = const(OPS[n.op].ref, ("op", n.op))
        if n.op == "eager":
            lines.append(f"    _r = {const(n.attr('call'))}([{args}])")
            lines.append(f"    if len(_r) != {len(n.outputs)}: raise ShapeMismatch('eager output count')")
            lines.append(f"    {outs}{',' if len(n.outputs) == 1 else ''} = _r")
            for o in n.outputs:
                for d in dd_by_value.get(o.id, []):
                    lines.append(f"    {ident(d.symbol)} = _shape({names[o.id]})[{d.axis}]")
                    bound.add(d.symbol)
                    if d.expr != d.symbol:
                        lines.append(f"    if {ident(d.symbol)} != {to_python(d.expr)}: "
                                     f"raise ShapeMismatch({str(d.symbol) + ' != ' + str(d.expr)!r})")
            for c in [c for c in pending if c[0].free_symbols <= bound]:  # decisions the trace took on them
                pending.remove(c)
                lines.append(f"    if not ({to_python(c[0])}): raise ShapeMismatch({str(c[0]) + ' (' + c[1] + ')'!r})")
            continue
        kw = "".join(f", {k}={attr_src(a)}" for k, a in n.attrs)
        call = f"{fn}({args}{kw})" if args else f"{fn}({kw[2:]})"
        if len(n.outputs) == 1 and n.outputs[0].weak:
            call = f"_item({call})"
        lines.append(f"    {outs} = {call}")
    rets = []
    for o in outputs:
        if o.kind == "value":
            rets.append(names[o.payload])
        elif o.kind == "dim":
            rets.append(to_python(o.payload))
        else:
            rets.append(const(o.payload))
    if steps and checks:
        lines += check_lines(_step_io(steps[-1])[1])
    for target, final in writebacks:
        lines.append(f"    if {names[final]} is not {names[target]}: _copyto({names[target]}, {names[final]})")
    lines.append("    return [" + ", ".join(rets) + "]")
    lines[head:head] = [f"    {name} = {src}" for src, name in hoisted.items()]
    n_head += len(hoisted)
    if pooled:  # the call's buffer set, taken for the steps and given back however they end
        lines[n_head:] = (["    _b = _pool.acquire()", "    try:"] + ["    " + x for x in lines[n_head:]]
                          + ["    finally:", "        _pool.release(_b)"])
    source = "\n".join(lines) + "\n"
    exec(compile(source, "<shapejit executable>", "exec"), ns)
    return source, ns, recipes


def _kernel_lines(kc: KernelCall, names, const, functions, pooled, into=None) -> list[str]:
    """`into`: output id -> the source of a slot the output may be written
    straight into (_stores_in_place), when that slot is C-contiguous and
    writeable."""
    lines = []
    for vid, shape, dtype in kc.outputs:
        names[vid] = f"v{vid}"
        shp = "(" + "".join(to_python(d) + ", " for d in shape) + ")"
        if into and vid in into:
            lines.append(f"    _t{vid} = {into[vid]}")
            # (a read-only slot too gets its own array: the assignment then raises numpy's error)
            lines.append(f"    v{vid} = _t{vid} if _t{vid}.flags.c_contiguous and _t{vid}.flags.writeable "
                         f"else _empty({shp}, {const(np.dtype(dtype))})")
        elif vid in pooled:
            lines.append(f"    v{vid} = _pool.get(_b, {vid}, {shp}, {const(np.dtype(dtype))})")
        else:
            lines.append(f"    v{vid} = _empty({shp}, {const(np.dtype(dtype))})")
    n_alloc = len(lines)
    lines += _call_lines(kc, names, const, functions)
    return lines if not kc.blas else _or_blas(kc, lines, n_alloc, names, const, functions)


def _call_lines(kc: KernelCall, names, const, functions) -> list[str]:
    """The lines that run kernel `kc` into its allocated outputs: on the
    calling thread, or split over the cores when its work is large enough
    (a product with an epilogue first packs the epilogue's arguments)."""
    lines = []
    checked = ("int", "errcell") in kc.args
    local = {}
    for vid, dims, unit_rows_ok in kc.prepare:
        local[vid] = f"_c{vid}"
        lines.append(f"    _c{vid} = _rows4({names[vid]}, {', '.join(to_python(d) for d in dims)}, {unit_rows_ok})")
    epilogue = None
    if kc.epilogue is not None:
        e = kc.epilogue
        srcs = _arg_sources(e, names, const)
        n_arr = sum(1 for a in e.args if a[0] == "array")
        n_int = sum(1 for a in e.args if a[0] in ("int", "intval"))
        groups = (srcs[:n_arr], srcs[n_arr:n_arr + n_int], srcs[n_arr + n_int:])  # arrays, ints, floats
        lines.append(f"    _ea = _epilogue_args({', '.join('(' + ''.join(x + ', ' for x in g) + ')' for g in groups)})")
        epilogue = const(_address(functions[e.tile]), ("address", e.tile)), "_addressof(_ea)"
    args = _arg_sources(kc, names, const, local, epilogue)
    fn = const(functions[kc.symbol], ("kernel", kc.symbol))
    rows, inner = to_python(kc.rows), to_python(kc.inner)
    static = isinstance(kc.rows, (int, sympy.Integer)) and isinstance(kc.inner, (int, sympy.Integer))
    if kc.parallel in functions and native_pool() is not None:  # one native call, split over the cores
        fpar = const(functions[kc.parallel], ("kernel", kc.parallel))
        pool = const(native_pool(), ("pool",))
        chunk = f"max(1, {CHUNK_MIN_WORK} // max(1, {inner}))"
        n_front = sum(1 for a in kc.args if a[0] != "float")  # (arrays and ints come before the floats)
        par_args = args[:n_front] + [chunk, pool] + args[n_front:]
        par = lambda n: f"{fpar}(0, {n}, {', '.join(par_args)})"
        min_work = PARALLEL_MIN_WORK
        rows_of_one = _gemv_split_lines(kc, names, fpar, pool)
    else:
        chunk = f"max(1, {PY_CHUNK_MIN_WORK} // max(1, {inner}))"
        argt = "(" + "".join(x + ", " for x in args) + ")"
        par = lambda n: f"_par({fn}, 0, {n}, {argt}, {chunk})"
        min_work = PY_PARALLEL_MIN_WORK
        rows_of_one = None
    serial = lambda n: f"{fn}(0, {n}, {', '.join(args)})"
    if rows_of_one is not None:  # (a product that may have one row: B's rows split over the cores)
        lines.append(f"    _n = {rows}")
        lines += rows_of_one
        lines.append(f"    elif _n * {inner} >= {min_work}: {par('_n')}")
        lines.append(f"    elif _n > 0: {serial('_n')}")
    elif static:  # (an unrolled loop's steps: the choice is made here, not at every call)
        n_rows, work = int(kc.rows), int(kc.rows) * int(kc.inner)
        if n_rows > 0:
            lines.append("    " + (par if work >= min_work else serial)(n_rows))
    else:
        lines.append(f"    _n = {rows}")
        lines.append(f"    if _n * {inner} >= {min_work}: {par('_n')}")
        lines.append(f"    elif _n > 0: {serial('_n')}")
    if checked:
        lines.append(f"    _check_bounds({kc.symbol!r})")
    if local:  # a prepared operand may be a copy: free it now, as any intermediate
        lines.append("    del " + ", ".join(local.values()))
    return lines


def _gemv_split_lines(kc: KernelCall, names, fpar: str, pool: str) -> list[str] | None:
    """The lines that run a product of one row split over B's rows
    (runtime/gemv.py) when it has one at run time, `_n` holding its units
    (its column strips then): an `if` the kernel's other lines follow as
    `elif`s.  None for a product that never has one row, or whose operands
    the kernel reads through strided views, or with an epilogue in its
    store."""
    if not kc.blas or kc.prepare or kc.epilogue is not None:
        return None
    a, b, (m, n, k) = kc.blas
    if isinstance(m, (int, sympy.Integer)) and int(m) != 1:
        return None
    m, n, k = (to_python(d) for d in (m, n, k))
    return [f"    _gt = _gemv_parts({m}, {k}, {n})",
            f"    if _gt: _gemv_split({fpar}, {pool}, {names[a]}, {names[b]}, {names[kc.outputs[0][0]]}, {n}, {k}, "
            f"_n, _gt)"]


def run_split(fn, par, rows: int, inner: int, args: tuple) -> None:
    """Run kernel `fn` (its parallel entry `par`) over [0, rows) as the lines
    _call_lines generates do: split over the cores when the work is large
    enough (on the native pool where it runs, else the Python pool), else
    on this thread.  For callers outside an executable (calibration)."""
    pool = native_pool()
    if rows * inner >= (PARALLEL_MIN_WORK if pool is not None else PY_PARALLEL_MIN_WORK):
        if pool is not None:
            par(0, rows, *args, max(1, CHUNK_MIN_WORK // max(1, inner)), pool)
        else:
            parallel_for(fn, 0, rows, args, max(1, PY_CHUNK_MIN_WORK // max(1, inner)))
    elif rows > 0:
        fn(0, rows, *args)


def _loop_lines(kc: KernelCall, names, const, functions, in_place: bool) -> list[str]:
    """A re-rolled loop's call: into its first input's buffer when
    `in_place` (nothing reads that value later) and the buffer is writeable
    and shares no memory with another operand (which reads the value before
    the loop), else into a copy."""
    vid = kc.outputs[0][0]
    names[vid] = f"v{vid}"
    t = names[kc.inputs[0]]
    arrays = {a[1] for a in kc.args if a[0] == "array"} - {vid}
    others = "".join(names[i] + ", " for i in kc.inputs[1:] if i in arrays)
    if in_place:
        alias = f" and not _aliased({t}, ({others}))" if others else ""
        lines = [f"    v{vid} = {t} if {t}.flags.writeable{alias} else _copy({t})"]
    else:
        lines = [f"    v{vid} = _copy({t})"]
    fn = const(functions[kc.symbol], ("kernel", kc.symbol))
    return lines + [f"    {fn}(0, {to_python(kc.rows)}, {', '.join(_arg_sources(kc, names, const))})"]


def _lifted_lines(kc: KernelCall, names, const, functions) -> list[str]:
    """A lifted loop's call (run_lifted): into copies of the arrays
    it stores into (the loop may abort: the caller's arrays stay as they
    were); its scalars through an int64 buffer."""
    written, scalars_in, scalars_out = kc.lifted
    lines = []
    for (vid, _, _), src in zip(kc.outputs, written):
        names[vid] = f"v{vid}"
        lines.append(f"    v{vid} = _copy({names[src]})")
    for vid, _ in scalars_out:
        names[vid] = f"v{vid}"
    fn = const(functions[kc.symbol], ("kernel", kc.symbol))
    arrays = "(" + "".join(names[a[1]] + ", " for a in kc.args if a[0] == "array" and type(a[1]) is int) + ")"
    ins = "(" + "".join(names[vid] + ", " for vid, _ in scalars_in) + ")"
    spec = const((tuple(t for _, t in scalars_in), tuple(t for _, t in scalars_out)))
    call = f"_run_lifted({fn}, {arrays}, {ins}, {spec})"
    outs = "".join(names[vid] + ", " for vid, _ in scalars_out)
    lines.append(f"    {outs} = {call}" if outs else f"    {call}")
    return lines


def run_lifted(fn, arrays: tuple, scalars: tuple, spec: tuple) -> tuple:
    """Run a lifted loop's function (codegen/pyloop.py ABI): one int64
    buffer holds its status, its scalar inputs packed by type
    (shapes/pyloop.py types) and its scalar outputs, unpacked as Python or
    numpy scalars of their types."""
    in_types, out_types = spec
    io = np.zeros(1 + len(in_types) + len(out_types), np.int64)
    f64 = io.view(np.float64)
    for k, (x, t) in enumerate(zip(scalars, in_types), 1):
        if t in _FLOATS:
            f64[k] = x
        else:
            v = int(x)
            if not -(1 << 63) <= v < (1 << 64 if t == "np.uint64" else 1 << 63):
                raise LoopAbort("a Python int past 64 bits")
            io[k] = v - (1 << 64) if v >= 1 << 63 else v  # (a uint64 past 2**63: its bits)
    fn(0, 1, *arrays, io)
    if io[0]:
        raise LoopAbort(ABORTS.get(int(io[0]), "an abort"))
    base = 1 + len(in_types)
    return tuple(_UNPACK[t](io, f64, base + k) for k, t in enumerate(out_types))


_FLOATS = ("float", "np.float64", "np.float32")
_UNPACK = {"int": lambda i, f, k: int(i[k]), "bool": lambda i, f, k: bool(i[k]),
           "float": lambda i, f, k: float(f[k]), "np.bool": lambda i, f, k: np.bool_(i[k]),
           "np.float64": lambda i, f, k: f[k], "np.float32": lambda i, f, k: np.float32(f[k]),
           "np.uint64": lambda i, f, k: np.uint64(int(i[k]) & ((1 << 64) - 1)),
           **{"np." + d: (lambda d: lambda i, f, k: np.dtype(d).type(i[k]))(d)
              for d in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")}}


def _arg_sources(kc: KernelCall, names, const, local=None, epilogue=None) -> list[str]:
    """The source of each argument of a kernel's ABI (codegen/abi.py
    KernelABI): an array's name (`local`: a prepared copy's), an int's
    expression or the error cell's address, an integer or bool scalar as an
    int, a float scalar as a double; a
    product's epilogue's (address, packed arguments) as `epilogue` gives them."""
    out = []
    for a in kc.args:
        if a[0] == "array":
            out.append((local or {}).get(a[1], names[a[1]]))
        elif a == ("int", "errcell"):
            out.append("_errcell()")
        elif a == ("int", "gemv"):  # (codegen/loops.py GEMV)
            out.append(const(dgemv_address(), ("gemv",)))
        elif a == ("int", "epilogue"):
            out.append(epilogue[0])
        elif a == ("int", "epilogue_args"):
            out.append(epilogue[1])
        elif a[0] == "int":
            out.append(to_python(a[1]))
        elif a[0] == "intval":  # (a runtime integer or bool scalar, exactly)
            out.append(f"int({names[a[1]]})")
        else:
            out.append(f"float({names[a[1]]})")
    return out


_DOUBLE, _INT64 = struct.Struct("=d"), struct.Struct("=q")


def _epilogue_args(arrays: tuple, ints: tuple, floats: tuple):
    """A fused epilogue's arguments packed as its tile entry reads them
    (codegen/support.py packed_entry): int64 words, an array as its object's
    address (the kernel reads numpy's array struct), a float as its bits.
    The caller holds the arrays, and this buffer, until the product returns."""
    words = [id(a) for a in arrays] + [int(i) for i in ints] + [_INT64.unpack(_DOUBLE.pack(x))[0] for x in floats]
    return (ctypes.c_int64 * max(1, len(words)))(*words)


def _address(fn) -> int:
    """The address of a loaded entry (a ctypes function)."""
    return ctypes.cast(fn, ctypes.c_void_p).value


def _or_blas(kc: KernelCall, lines: list[str], n_alloc: int, names, const, functions) -> list[str]:
    """A product's lines (after the output's `n_alloc` allocation lines) as
    the choice of runtime/gemmchoice.py: numpy's matmul into the output (and
    then its epilogue's kernel, when it has one), or the kernel; both in
    turns, timed, when the product's shape class is undecided (the kernel
    last: its output is the call's)."""
    a, b, sizes = kc.blas
    out = names[kc.outputs[0][0]]
    char = np.dtype(kc.outputs[0][2]).char
    fused = kc.epilogue is not None
    strided = any(vid == b for vid, _, _ in kc.prepare)  # (B through a view the runtime makes, or a copy)
    if all(isinstance(d, (int, sympy.Integer)) for d in sizes):
        key = const(gemmchoice.shape_class(char, *(int(d) for d in sizes), fused, strided))
        head = []
    else:  # (dims are Python ints at run time)
        key = "_gk"
        head = [f"    _gk = _gemm_class({char!r}, {', '.join(to_python(d) for d in sizes)}, {fused}, {strided})"]
    blas = [f"    _matmul({names[a]}, {names[b]}, out={out})"]
    if fused:
        blas += _call_lines(kc.epilogue, names, const, functions)
    kernel = lines[n_alloc:]
    race = ["        _tk, _tb = [], []", "        for _ in _ROUNDS:", "            _t0 = _clock()"]
    race += ["        " + x for x in blas] + ["            _t1 = _clock()"]
    race += ["        " + x for x in kernel]
    race += ["            _tb.append(_t1 - _t0); _tk.append(_clock() - _t1)", f"        _gemm_decide({key}, _tk, _tb)"]
    return (lines[:n_alloc] + head + [f"    _g = _last[{kc.outputs[0][0]}] = _gemm_best.get({key})", "    if _g:"]
            + ["    " + x for x in blas]
            + ["    elif _g is not None:"] + ["    " + x for x in kernel] + ["    else:"] + race)


# bounds-checked kernels (SHAPEJIT_BOUNDS_CHECK=1) flag an out-of-bounds access here
_errcells = threading.local()


def _errcell() -> ctypes.c_int64:
    """The calling thread's bounds-check error cell: a checked kernel (its
    chunks on any thread of the pool) stores a nonzero into the cell of the
    call that runs it, so two threads' calls never see each other's errors."""
    cell = getattr(_errcells, "cell", None)
    if cell is None:
        cell = _errcells.cell = ctypes.c_int64(0)
    return cell


def _errcell_address() -> int:
    return ctypes.addressof(_errcell())


def _check_bounds(symbol: str) -> None:
    cell = _errcell()
    if cell.value:
        cell.value = 0
        raise IndexError(f"shapejit: kernel {symbol} accessed memory out of bounds (a compiler bug)")


def _has_sym(a) -> bool:
    if isinstance(a, sympy.Basic):
        return True
    return type(a) is tuple and any(_has_sym(x) for x in a)


def _rows4(x, batch, rows, cols, unit_rows_ok=False):
    """x as an (outer, inner, rows, cols) array, outer * inner = batch, whose
    strides are non-negative multiples of the item size and whose columns
    have unit stride (or, with `unit_rows_ok`, whose rows have): a view when
    numpy can make one — x's leading (batch) dims merged into one or, failing
    that, two groups — else a C-contiguous copy."""
    lead = x.shape[:-2] if x.ndim >= 2 and x.shape[-2:] == (rows, cols) else None
    y = _view(x, (1, batch, rows, cols))
    if y is None and lead and len(lead) > 1:
        for p in range(1, len(lead)):  # (batch dims b0..bn: [b0..bp) and [bp..bn) each merged)
            outer = int(np.prod(lead[:p]))
            y = _view(x, (outer, batch // max(1, outer), rows, cols))
            if y is not None:
                break
    if y is None:
        y = np.ascontiguousarray(x).reshape(1, batch, rows, cols)
    s, size = y.strides, y.itemsize
    unit = cols <= 1 or s[3] == size or (unit_rows_ok and (rows <= 1 or s[2] == size))
    if not unit or min(s) < 0 or any(v % size for v in s):
        y = np.ascontiguousarray(y)
    return y


def _view(x, shape):
    """x reshaped to `shape` without a copy, or None."""
    try:
        return x.reshape(shape, copy=False)
    except ValueError:
        return None


def _item(x):
    return x.item() if isinstance(x, np.generic) else x


_NOT_ALLOCATED = _ALIASING | _EXTERNAL  # (the memory model counts what the executable allocates)


MAX_PEAK_TERMS = 64  # distinct symbolic live-byte sums the memory model keeps before it bounds them


def _memory_model(steps, outputs, symbols, pooled) -> str:
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
    dead_at: dict[int, list[int]] = {}
    last: dict[int, int] = {}
    for k, st in enumerate(steps):
        for vid in _step_io(st)[0]:
            last[vid] = k
    keep = {o.value_id for o in outputs if o.value_id is not None}
    for vid, k in last.items():
        if vid not in keep:
            dead_at.setdefault(k, []).append(vid)
    # the symbolic live bytes as a multiset of sizes (no sympy per step: an
    # unrolled loop has tens of thousands of steps)
    live_int, live_sym, peaks, top_int = 0, {}, {}, 0
    for k, st in enumerate(steps):
        for vid in _step_io(st)[1]:
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


def _memory_function(source: str):
    sizes_fn = compile_source(source)

    def memory(*dims):
        r = sizes_fn(*dims)
        return r[0], max(r[1:])
    return memory

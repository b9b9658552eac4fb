"""A Plan's kernels -> one LLVM module (text) and the ABI of every kernel.

The module text is deterministic for a given plan, dtypes, layouts and
options, so it is also the content the compile cache hashes."""
from __future__ import annotations

import dataclasses
from collections import Counter

import sympy
from llvmlite import ir

from clustering.partition import Kernel, Plan
from codegen import gemm, support
from codegen.artifact import Artifact, KernelInfo
from codegen.kernels import KernelABI, KernelEmitter
from codegen.llvm import compile_ir
from codegen.loops import emit_loop
from codegen.pyloop import emit_pyloop, pyloop_abi
from shapes.ir import Node


def emit_plan(plan: Plan, contiguous: set[int], checked: bool = False
              ) -> tuple[str, list[KernelABI], dict[int, KernelABI], dict[int, KernelABI]]:
    """-> (module text, ABI of each kernel of the plan, (ABI, operands to
    prepare) of each matmul step that runs on the GEMM library kernel
    (codegen/gemm.py), by its node's output id, ABI of each re-rolled loop
    (codegen/loops.py) and lifted loop (codegen/pyloop.py), by its node's
    first output's id).  `checked`: every load and
    store of the loop kernels is bounds-checked against its array (slow; for
    tests; matmuls then stay in numpy).  The text is "" when the plan has no
    kernel and no loop."""
    gemms = {}
    for s in plan.steps if not checked else ():
        if isinstance(s, Node) and gemm.compiles(s):
            (args, rows, inner), prepare = gemm.abi_of(s, contiguous)
            gemms[s.out.id] = (KernelABI(gemm.symbol_for(s.out.dtype), args, rows, inner), prepare)
    kernels = plan.kernels()
    loop_nodes = [s for s in plan.steps if isinstance(s, Node) and s.op in ("loop", "pyloop")]
    if not kernels and not loop_nodes:
        return "", [], gemms, {}
    module = ir.Module(name="shapejit")  # (compile_ir sets the host's triple and data layout)
    producers = {o.id: n for n in plan.graph.nodes for o in n.outputs}
    loops, programs = {}, {}  # (programs: one function per program, a loop lifted again runs the same one)
    for k, n in enumerate(loop_nodes):
        if n.op == "loop":
            loops[n.out.id] = emit_loop(module, n, producers, f"sj_loop{k}")
            continue
        prog = n.attr("program")
        if id(prog) not in programs:
            programs[id(prog)] = f"sj_pyloop{k}"
            emit_pyloop(module, n, programs[id(prog)])
        loops[n.out.id] = pyloop_abi(n, programs[id(prog)])
    emitted: dict = {}
    exact = [_structure(k, producers, contiguous, checked) for k in kernels]
    general = [_generalized(k) for k in kernels]
    gen = [_structure(g, producers, contiguous, checked) for g, _ in general]
    # (the distinct exact kernels of each general form)
    variants = Counter(gk for gk, _ in {(g[0], e[0]) for g, e in zip(gen, exact)})
    abis = []
    for k, e, (g, sizes), gs in zip(kernels, exact, general, gen):
        if sizes and variants[gs[0]] >= SHARE_SIZES:
            abis.append(_concrete(_emit_once(module, g, gs, producers, contiguous, checked, emitted), sizes))
        else:
            abis.append(_emit_once(module, k, e, producers, contiguous, checked, emitted))
    for a in _distinct(abis + list(loops.values())):
        support.parallel_entries(module, module.globals[a.symbol], a.n_arrays, a.n_ints, a.n_floats, python=True)
    return str(module), abis, gemms, loops


def _emit_once(module, k, structure, producers, contiguous, checked, emitted: dict) -> KernelABI:
    """k's ABI, from the function of an equal kernel emitted before when
    there is one: a Python loop unrolled into the trace repeats the same
    kernel over values with other ids, and LLVM compiles each distinct
    kernel once.  Two kernels are equal when everything the emitter reads
    is, up to value ids: members, domain, inputs and outputs (dtype, shape,
    weak, C-contiguity, the constant or dim each scalar input folds):
    `structure` is k's _structure."""
    key, ids = structure
    if key in emitted:
        abi, first_ids = emitted[key]
        rename = {a: b for a, b in zip(first_ids, ids)}
        return dataclasses.replace(abi, args=tuple((a[0], rename[a[1]]) if a[0] in ("array", "float") else a
                                                   for a in abi.args))
    abi = KernelEmitter(module, k, producers, contiguous, f"sj_{k.name}", checked).emit()
    emitted[key] = abi, ids
    return abi


# A loop whose slices grow (`y[:k] += alpha * y[k - 1::-1]` for k in range(n))
# traces one kernel per size: when at least this many kernels differ only in
# their sizes, one function with the sizes as arguments serves them all.
SHARE_SIZES = 3


def _generalized(k: Kernel) -> tuple[Kernel, dict]:
    """-> (k with each concrete extent above 1 of its domain and values
    replaced by a symbol, {symbol: the extent}): one symbol per distinct
    extent, numbered in order of appearance, so kernels that differ only in
    their sizes have the same structure.  0 and 1 stay: they decide
    emptiness and broadcasting."""
    syms: dict[int, sympy.Symbol] = {}

    def dim(d):
        if type(d) is int and d > 1:
            if d not in syms:
                syms[d] = sympy.Symbol(f"_g{len(syms)}", integer=True, positive=True)
            return syms[d]
        return d
    vals: dict[int, object] = {}

    def val(v):
        if v.id not in vals:
            vals[v.id] = dataclasses.replace(v, shape=tuple(map(dim, v.shape)))
        return vals[v.id]
    domain = tuple(map(dim, k.domain))
    g = dataclasses.replace(
        k, domain=domain, inputs=list(map(val, k.inputs)),
        nodes=[dataclasses.replace(n, inputs=tuple(map(val, n.inputs)), outputs=tuple(map(val, n.outputs)))
               for n in k.nodes],
        outputs=list(map(val, k.outputs)), matmul_inputs=list(map(val, k.matmul_inputs)))
    return g, {s: d for d, s in syms.items()}


def _concrete(abi: KernelABI, sizes: dict) -> KernelABI:
    """The ABI of a size-generic function for one kernel: its sizes as the
    int arguments and in the split of its work."""
    def sub(e):
        if not isinstance(e, sympy.Basic):
            return e
        e = sympy.sympify(e.xreplace(sizes))
        return int(e) if e.is_Integer else e
    return dataclasses.replace(abi, args=tuple(("int", sub(a[1])) if a[0] == "int" else a for a in abi.args),
                               rows=sub(abi.rows), inner=sub(abi.inner))


def _structure(k, producers, contiguous, checked) -> tuple[tuple, list[int]]:
    """(k with its value ids numbered in order of appearance, those ids): a
    hashable key (shapes stay sympy expressions: printing them is slow), or
    a key equal to no other's."""
    order: dict[int, int] = {}

    def val(v) -> tuple:
        return order.setdefault(v.id, len(order)), v.dtype, v.shape, v.weak

    def fold(v):
        p = producers.get(v.id)
        if p is not None and p.op == "const":
            return "const", type(p.attr("value")), repr(p.attr("value"))
        return ("dim", p.attr("expr")) if p is not None and p.op == "dim" else ()

    key = (checked, k.domain,
           tuple((val(v), v.id in contiguous, fold(v)) for v in k.inputs),
           tuple((n.op, tuple(map(val, n.inputs)), n.attrs, tuple(map(val, n.outputs))) for n in k.nodes),
           tuple(map(val, k.outputs)), tuple(map(val, k.matmul_inputs)))
    try:
        hash(key)
    except TypeError:  # (an attribute numpy holds by identity: this kernel is not shared)
        key = object()
    return key, list(order)


def entries(abis: list[KernelABI]) -> tuple:
    """(symbol, arrays, ints, floats, Python entry) of every kernel function
    the module exports: each kernel and its parallel entry (codegen/support.py),
    with their Python entries (codegen/pycall.py)."""
    return support.with_parallel(((a.symbol, a.n_arrays, a.n_ints, a.n_floats) for a in _distinct(abis)),
                                 python=True)


def _distinct(abis: list[KernelABI]):
    """One ABI per function (kernels share functions: _emit_once, _concrete)."""
    return {a.symbol: a for a in abis}.values()


def compile_module(text: str, abis: list[KernelABI], metadata: dict | None = None, key_symbol: str = "") -> Artifact:
    return compile_ir(text, [KernelInfo(*k) for k in entries(abis)], metadata or {}, key_symbol=key_symbol)

"""A Plan's kernels -> one LLVM module (text) and the ABI of every kernel.

The module text is deterministic for a given plan, dtypes, layouts and
options, so it is also the content the compile cache hashes."""
from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field

import sympy
from llvmlite import ir

from clustering.partition import Kernel, Plan
from codegen import gemm, parallel
from codegen.abi import KernelABI
from codegen.artifact import Artifact, KernelInfo
from codegen.llvm import compile_ir
from codegen.loops import emit_loop
from codegen.pyloop import emit_pyloop, pyloop_abi
from codegen.schedule import KernelEmitter
from shapes import config
from shapes.ir import Node
from shapes.ops import FRESH, FRESH_C, VIEW_OF_INPUT, ops_returning


@dataclass
class Lowered:
    """What lowering a plan made: the module text (the content the compile
    cache hashes; "" when the plan has no kernel and no loop) and the ABIs
    of what it calls."""
    text: str
    kernels: list[KernelABI]  # of each kernel of the plan, in order
    gemms: dict  # matmul output id -> (ABI, operands to prepare) of a product on the GEMM library kernel
    loops: dict  # first output id -> ABI of a re-rolled loop (codegen/loops.py) or a lifted one (pyloop.py)
    epilogues: dict = field(default_factory=dict)  # index of a kernel in the plan -> (its tile entry, the
    # output id of the product whose GEMM calls it on each final block of C: gemm.fuses, _epilogues)

    def entries(self) -> tuple:
        """Every function the module exports (see entries())."""
        return entries(self.kernels + list(self.loops.values()), tuple(t for t, _ in self.epilogues.values()))


def emit_plan(plan: Plan, contiguous: set[int], checked: bool = False) -> Lowered:
    """Lower every kernel, re-rolled loop and lifted loop of the plan into
    one module, and find the matmul steps that run on the GEMM library
    kernel (codegen/gemm.py) and the kernels fused into their store.
    `checked`: every load and store of the loop kernels is bounds-checked
    against its array (slow; for tests; matmuls then stay in numpy)."""
    gemms, products = {}, {}
    for s in plan.steps if not checked else ():
        if isinstance(s, Node) and gemm.compiles(s):
            (args, rows, inner), prepare = gemm.abi_of(s, contiguous)
            gemms[s.out.id] = (KernelABI(gemm.symbol_for(s.out.dtype), args, rows, inner), prepare)
            products[s.out.id] = s
    kernels = plan.kernels()
    index = {id(k): i for i, k in enumerate(kernels)}
    fused = {index[id(k)]: vid for vid, k in _epilogues(plan, products).items()} if fuse_epilogues() else {}
    loop_nodes = [s for s in plan.steps if isinstance(s, Node) and s.op in ("loop", "pyloop")]
    if not kernels and not loop_nodes:
        return Lowered("", [], gemms, {})
    module = ir.Module(name="shapejit")  # (compile_ir sets the host's triple and data layout)
    producers = plan.graph.producers()
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
    abis, epilogues = [], {}
    for i, (k, e, (g, sizes), gs) in enumerate(zip(kernels, exact, general, gen)):
        shared = sizes and variants[gs[0]] >= SHARE_SIZES
        if shared:
            k, e = g, gs
        abi = _emit_once(module, k, e, producers, contiguous, checked, emitted, tile=i in fused)
        if i in fused:
            epilogues[i] = _tile_entry(module, abi), fused[i]
        abis.append(_concrete(abi, sizes) if shared else abi)
    for a in _distinct(abis + list(loops.values())):
        parallel.parallel_entries(module, module.globals[a.symbol], a.n_arrays, a.n_ints, a.n_floats, python=True)
    return Lowered(str(module), abis, gemms, loops, epilogues)


# steps a product may be moved past, to run right before the kernel of its
# epilogue (when they do not read the product): constants, and ops that make
# new arrays or views and never write one (a setitem, a re-rolled loop or an
# eager call may write an operand's buffer)
_PASSABLE = ops_returning(FRESH, FRESH_C, VIEW_OF_INPUT) | {"const", "dim"}

# Whether a kernel that reads a product may run in the GEMM's store (off: its
# own pass after the product).  Off unless SHAPEJIT_EPILOGUE_IN_STORE=1: on
# the AMD EPYC znver3 (AVX2, no AVX-512) the store ran 0.86-1.01x the pass's
# speed (median 0.96) for bias, bias + GELU and bias + residual at M = 1 ..
# 1024, (K, N) = (768, 3072) and (3072, 768) (`python -m bench.epilogue --ms
# 1,16,64,256,1024`), with numpy's BLAS on our pool (no spinning threads
# beside either; the product stays in its 32 MiB L3 for the pass).  On the
# AMD EPYC znver5 (AVX-512) the store ran 0.91-1.00x (median 0.98; bias + GELU
# 0.91-0.99) at M = 1 .. 1024 (`--ms 1,16,64,128,256,1024`, 2026-11-27): off
# there too.  It changes what a trace compiles to, so it is part of a
# saved trace's key (jit/compile.py plan_switches).  FUSE_EPILOGUES, when not
# None, overrides the variable (tests and benches compare the two).
FUSE_EPILOGUES: bool | None = None


def fuse_epilogues() -> bool:
    """Whether this compile puts a product's epilogue in the GEMM's store."""
    return config.get("SHAPEJIT_EPILOGUE_IN_STORE") if FUSE_EPILOGUES is None else FUSE_EPILOGUES


def _epilogues(plan: Plan, products: dict) -> dict:
    """The kernel fused into the store of each product (gemm.fuses) by the
    product's output id: the first kernel that reads the product, when the
    steps before it can run before the product (_PASSABLE)."""
    out = {}
    for i, s in enumerate(plan.steps):
        if not (isinstance(s, Node) and s.out.id in products):
            continue
        for later in plan.steps[i + 1:]:
            reads = any(v.id == s.out.id for v in later.inputs)
            if isinstance(later, Kernel) and reads:
                if gemm.fuses(s, later):
                    out[s.out.id] = later
                break
            if reads or isinstance(later, Node) and later.op not in _PASSABLE:
                break
    return out


def _tile_entry(module, abi: KernelABI) -> str:
    """The packed tile entry (codegen/parallel.py packed_entry) of the kernel
    whose whole-domain function is `abi`'s, emitted once."""
    name = abi.symbol + "_tile"
    if name + "_packed" not in module.globals:
        parallel.packed_entry(module, module.globals[name], 4, abi.n_arrays, abi.n_ints, abi.n_floats)
    return name + "_packed"


def _emit_once(module, k, structure, producers, contiguous, checked, emitted: dict, tile: bool = False) -> KernelABI:
    """k's ABI, from the function of an equal kernel emitted before when
    there is one: a Python loop unrolled into the trace repeats the same
    kernel over values with other ids, and LLVM compiles each distinct
    kernel once.  Two kernels are equal when everything the emitter reads
    is, up to value ids: members, domain, inputs and outputs (dtype, shape,
    weak, C-contiguity, the constant or dim each scalar input folds):
    `structure` is k's _structure.  `tile`: the kernel's code is its tile
    function (`<symbol>_tile`, for a GEMM's store), the whole-domain
    function a call of it over every column (compiled once, not twice)."""
    key, ids = structure
    if (key, tile) in emitted:
        abi, first_ids = emitted[key, tile]
        rename = {a: b for a, b in zip(first_ids, ids)}
        return dataclasses.replace(abi, args=tuple(
            (a[0], (a[1][0], rename[a[1][1]]) if isinstance(a[1], tuple) else rename[a[1]])
            if a[0] in ("array", "intval", "float") else a for a in abi.args))
    symbol = f"sj_{k.name}"
    if tile:
        em = KernelEmitter(module, k, producers, contiguous, symbol + "_tile", checked, tile=True)
        abi = dataclasses.replace(em.emit(), symbol=symbol)
        em.whole_domain(symbol)
    else:
        abi = KernelEmitter(module, k, producers, contiguous, symbol, checked).emit()
    emitted[key, tile] = abi, ids
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


def entries(abis: list[KernelABI], tiles: tuple = ()) -> tuple:
    """(symbol, arrays, ints, floats, Python entry) of every kernel function
    the module exports: each kernel and its parallel entry (codegen/parallel.py),
    with their Python entries (codegen/pycall.py), and the packed tile entries
    `tiles` (five i64 arguments: called by address from a GEMM)."""
    return parallel.with_parallel(((a.symbol, a.n_arrays, a.n_ints, a.n_floats) for a in _distinct(abis)),
                                 python=True) + tuple((t, 0, 3, 0, "") for t in dict.fromkeys(tiles))


def _distinct(abis: list[KernelABI]):
    """One ABI per function (kernels share functions: _emit_once, _concrete)."""
    return {a.symbol: a for a in abis}.values()


def compile_module(text: str, exported: tuple, metadata: dict | None = None, key_symbol: str = "") -> Artifact:
    """`exported`: entries()."""
    return compile_ir(text, [KernelInfo(*k) for k in exported], metadata or {}, key_symbol=key_symbol)

"""A Plan's kernels -> one LLVM module (text) and the ABI of every kernel.

The module text is deterministic for a given plan, dtypes, layouts and
options, so it is also the content the compile cache hashes."""
from __future__ import annotations

from llvmlite import ir

from clustering.partition import Plan
from codegen import gemm, support
from codegen.artifact import Artifact, KernelInfo
from codegen.kernels import KernelABI, KernelEmitter
from codegen.llvm import compile_ir
from shapes.ir import Node


def emit_plan(plan: Plan, contiguous: set[int], checked: bool = False
              ) -> tuple[str, list[KernelABI], dict[int, KernelABI]]:
    """-> (module text, ABI of each kernel of the plan, (ABI, operands to
    prepare) of each matmul step that runs on the GEMM library kernel
    (codegen/gemm.py), by its node's output id).  `checked`: every load and
    store of the loop kernels is bounds-checked against its array (slow; for
    tests; matmuls then stay in numpy).  The text is "" when the plan has no
    kernel."""
    gemms = {}
    for s in plan.steps if not checked else ():
        if isinstance(s, Node) and gemm.compiles(s):
            (args, rows, inner), prepare = gemm.abi_of(s, contiguous)
            gemms[s.out.id] = (KernelABI(gemm.symbol_for(s.out.dtype), args, rows, inner), prepare)
    kernels = plan.kernels()
    if not kernels:
        return "", [], gemms
    module = ir.Module(name="shapejit")  # (compile_ir sets the host's triple and data layout)
    producers = {o.id: n for n in plan.graph.nodes for o in n.outputs}
    abis = [KernelEmitter(module, k, producers, contiguous, f"sj_{k.name}", checked).emit() for k in kernels]
    for a in abis:
        support.parallel_entries(module, module.globals[a.symbol], a.n_arrays, a.n_ints, a.n_floats, python=True)
    return str(module), abis, gemms


def entries(abis: list[KernelABI]) -> tuple:
    """(symbol, arrays, ints, floats, Python entry) of every kernel function
    the module exports: each kernel and its parallel entry (codegen/support.py),
    with their Python entries (codegen/pycall.py)."""
    return support.with_parallel(((a.symbol, a.n_arrays, a.n_ints, a.n_floats) for a in abis), python=True)


def compile_module(text: str, abis: list[KernelABI], metadata: dict | None = None) -> Artifact:
    return compile_ir(text, [KernelInfo(*k) for k in entries(abis)], metadata or {})

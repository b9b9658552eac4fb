"""A Plan's kernels -> one LLVM module -> one Artifact (object code + the
ABI of every kernel, as plain data)."""
from __future__ import annotations

from llvmlite import ir

from clustering.partition import Plan
from codegen.artifact import Artifact, KernelInfo
from codegen.kernels import KernelABI, KernelEmitter
from codegen.llvm import compile_ir, host_target


def lower_plan(plan: Plan, contiguous: set[int], name: str = "shapejit",
               checked: bool = False) -> tuple[Artifact | None, list[KernelABI]]:
    """`checked`: every load and store is bounds-checked against its array
    (slow; for tests)."""
    kernels = plan.kernels()
    if not kernels:
        return None, []
    module = ir.Module(name=name)
    tm = host_target()
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    producers = {o.id: n for n in plan.graph.nodes for o in n.outputs}
    abis = []
    for k in kernels:
        abis.append(KernelEmitter(module, k, producers, contiguous, f"{name}_{k.name}", checked).emit())
    infos = [KernelInfo(a.symbol, a.n_arrays, a.n_ints, a.n_floats) for a in abis]
    return compile_ir(str(module), infos, {"kernels": [a.symbol for a in abis]}), abis

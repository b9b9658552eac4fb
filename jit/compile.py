"""Building an Executable from a trace: the reference back end runs the graph
node by node in numpy; the llvm back end runs the pass pipeline, partitions
into fused kernels, compiles them to one artifact and links it."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field


from clustering import partition, run_pipeline
from clustering.partition import Kernel, Plan
from jit.trace import TraceResult
from runtime.executable import Executable, KernelCall, OutputSpec
from shapes.ir import ArrayConst, Graph
from shapes.verify import checks_enabled

BACKENDS = ("llvm", "reference")

# ops whose numpy reference returns a fresh C-contiguous array
_FRESH_CONTIGUOUS = {"matmul", "sum", "max", "min", "prod", "mean", "var", "std", "argmax", "argmin",
                     "any", "all", "full", "arange", "concatenate"}


@dataclass
class Build:
    executable: Executable
    plan: Plan | None = None
    seconds: dict = field(default_factory=dict)
    cache_level: str | None = None  # "memory" | "disk" when the object code came from the cache


def build(tr: TraceResult, symbols, backend: str, input_contiguous: list[bool], name: str,
          signature: str = "") -> Build:
    if backend == "reference":
        return Build(Executable(tr.graph, symbols, tr.outputs, tr.dd_dims))
    times = {}
    t0 = time.perf_counter()
    g = run_pipeline(tr.graph, checks=checks_enabled())
    outputs = _remap_outputs(tr.outputs, g)
    plan = partition(g)
    t1 = time.perf_counter()
    times["passes"] = t1 - t0
    contiguous = _contiguous_values(g, plan, input_contiguous)
    from codegen.lower import emit_plan
    from runtime.native import kernel_function
    checked = os.environ.get("SHAPEJIT_BOUNDS_CHECK", "") not in ("", "0")
    text, abis = emit_plan(plan, contiguous, checked)
    t2 = time.perf_counter()
    times["codegen"] = t2 - t1
    functions, loaded, level = {}, None, None
    if abis:
        from codegen.kernels import DATA_OFFSET, STRIDES_OFFSET
        from runtime.native import check_array_layout
        check_array_layout(DATA_OFFSET, STRIDES_OFFSET)
        artifact, loaded, level = _artifact(text, abis, checked, name, signature)
        for a in abis:
            functions[a.symbol] = kernel_function(loaded.address(a.symbol), a.n_arrays, a.n_ints, a.n_floats)
    t3 = time.perf_counter()
    times["llvm" if level is None else "load"] = t3 - t2
    by_kernel = {id(k): a for k, a in zip(plan.kernels(), abis)}
    steps = []
    for s in plan.steps:
        if isinstance(s, Kernel):
            a = by_kernel[id(s)]
            steps.append(KernelCall(a.symbol, tuple(v.id for v in s.inputs),
                                    tuple((v.id, v.shape, v.dtype) for v in s.outputs), a.args, a.rows, a.inner))
        else:
            steps.append(s)
    defined = {o.id for n in g.nodes for o in n.outputs}
    dd = [d for d in tr.dd_dims if d.value_id in defined]
    exe = Executable(g, symbols, outputs, dd, steps, functions, keepalive=loaded)
    return Build(exe, plan, times, level)


def _artifact(text: str, abis, checked: bool, name: str, signature: str):
    """Object code for `text`: from the cache when a valid entry exists
    (checksum and versions verified before anything is linked), else LLVM."""
    from codegen.artifact import Artifact, ArtifactError
    from codegen.lower import compile_module
    from runtime.cache import SHAPEJIT_VERSION, content_key, default_cache
    from runtime.loader import load
    cache = default_cache()
    key = content_key(text, target_description(), SHAPEJIT_VERSION, f"checked={checked}")
    blob, level = cache.get(key)
    if blob is not None:
        try:
            artifact = Artifact.from_bytes(blob)
            if [k.symbol for k in artifact.kernels] != [a.symbol for a in abis]:
                raise ArtifactError("kernel list does not match")
            return artifact, load(artifact), level
        except ArtifactError:
            cache.drop(key)
            cache.stats.corrupt += 1
    artifact = compile_module(text, abis, {"function": name})
    cache.put(key, artifact.to_bytes(), name, signature)
    return artifact, load(artifact), None


def target_description() -> str:
    import llvmlite
    import llvmlite.binding as llvm
    from codegen.llvm import host_target
    tm = host_target()
    return "|".join([tm.triple, llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten(),
                     ".".join(map(str, llvm.llvm_version_info)), llvmlite.__version__])


def _remap_outputs(outputs: list[OutputSpec], g: Graph) -> list[OutputSpec]:
    it = iter(g.outputs)
    return [OutputSpec("value", next(it).id) if o.kind == "value" else o for o in outputs]


def _contiguous_values(g: Graph, plan: Plan, input_contiguous: list[bool]) -> set[int]:
    out = {v.id for v, c in zip(g.inputs, input_contiguous) if c}
    kernel_outs = {v.id for k in plan.kernels() for v in k.outputs}
    out |= kernel_outs
    for n in g.nodes:
        if n.op == "const" and isinstance(n.attr("value"), ArrayConst):
            if n.attr("value").array.flags.c_contiguous:
                out.add(n.out.id)
        elif n.op in _FRESH_CONTIGUOUS:
            out.update(o.id for o in n.outputs)
        elif n.op == "reshape" and n.inputs[0].id in out:
            out.add(n.out.id)
    return out

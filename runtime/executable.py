"""The Executable: a graph turned into one Python function that runs its
steps in order, both back ends': a step is a compiled kernel, a product (our
GEMM or numpy's matmul, chosen per shape: runtime/gemmchoice.py), a
re-rolled or lifted loop, or the op's numpy reference implementation.  With
no compiled function (backend="reference") every step is the latter: the
oracle the compiled back end is tested against.

Hot path: the generated function (runtime/generate.py) unpacks inputs and
bound dims, runs the steps, and returns the flat outputs; no sympy, no dict
lookups per node.  Its buffers follow runtime/bufferplan.py; a kernel step
runs as runtime/kernelcall.py writes it.
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from shapes.ir import Graph
from runtime.bufferplan import memory_function, memory_model, poolable
from runtime.bufferpool import BufferPool
from runtime.generate import generate, namespace, rebuild_const


@dataclass(frozen=True)
class OutputSpec:
    kind: str      # "value" | "argument" | "const" | "dim" | "writeback" | "check" | "view"
    payload: object  # value id (an "argument": the final value of an argument the call writes, returned as
                     # the caller's array: `x += 1; return x`) | the object | sympy expr
                     # | (input value id, value id written into it)
                     # | (value id, kind, outcome): a graph break's outcome, checked at run time
                     # | (input value id, ((view op, attrs), ...)): a view of an argument the call writes,
                     #   or the real or imaginary part of one

    @property
    def value_id(self) -> int | None:
        """The graph value this output returns (writes back, checks), if any."""
        if self.kind in ("value", "argument"):
            return self.payload
        return self.payload[1] if self.kind == "writeback" else self.payload[0] if self.kind == "check" else None


@dataclass(frozen=True)
class DataDependentDim:
    value_id: int
    axis: int | None  # (None: the value itself, an index_dim's)
    symbol: sympy.Symbol
    expr: object  # what the trace relied on: the symbol itself when free


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
        pooled = poolable(self.steps, outputs) if steps is not None else set()
        source, ns, consts = generate(graph, self.steps, self.symbols, outputs, dd_dims, functions or {},
                                      self.pool, pooled, dd_checks)
        self.run = ns["run"]
        self.products = ns["_last"]
        memory_source = memory_model(self.steps, outputs, self.symbols, pooled)
        self.memory = memory_function(memory_source)
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
        ns = namespace(self.pool)
        for name, recipe in p.consts.items():
            ns[name] = rebuild_const(recipe, functions)
        exec(compile(p.source, "<shapejit executable>", "exec"), ns)
        self.run = ns["run"]
        self.products = ns["_last"]
        self.memory = memory_function(p.memory_source)
        self.portable = p
        return self


"""What a JitFunction did, for people.  In: the function's state (its keys
and entries, metrics, the values its traces read, its log); out: stats(),
the figures its Prometheus metrics report as a dict, and explain()'s text:
per signature its guards, dims, eager nodes, graph breaks, graph, clusters
and products, then the product dispatch, the values keyed, and the
recompiles and fallbacks."""
from __future__ import annotations

import numpy as np

from jit.compile import calibrating, gemm_dispatch
from jit.entries import CompiledEntry
from jit.persist import scans_of
from jit.scan import RACE_CALLS
from runtime.dispatch import describe as describe_tree

# how a product ran (runtime/executable.py Executable.products)
_VARIANT = {True: "numpy's matmul (BLAS)", False: "the GEMM kernel", None: "both, measured (its class's first call)"}


def stats(jf) -> dict:
    m = jf.metrics
    return {"traces": m.traces, "compiles": m.compiles, "recompiles": sum(m.recompiles.values()),
            "entry_hits": m.entry_hits, "cache_hits_memory": m.cache_hits_at("memory"),
            "cache_hits_disk": m.cache_hits_at("disk"), "cache_hits_remote": m.cache_hits_at("remote"),
            "cache_misses": m.cache_misses,
            "fallbacks": sum(m.fallbacks.values()), "eager_calls": m.eager_calls, "calls": m.calls,
            "entries": jf._n_entries, "bytes_allocated": m.bytes_allocated, "peak_bytes": m.peak_bytes,
            "eager_nodes": sum(e.eager_nodes for s in jf._keys.values() for e in s.entries),
            "graph_breaks": sum(e.graph_breaks for s in jf._keys.values() for e in s.entries)}


def describe(jf) -> str:
    lines = [f"shapejit: {jf.__qualname__} (dynamic={jf.dynamic!r}, backend={jf.backend})",
             "stats: " + ", ".join(f"{k}={v}" for k, v in stats(jf).items())]
    for key, state in jf._keys.items():
        sig = state.signature.describe() if state.signature else str(key)
        lines.append(f"\nsignature {sig}:")
        if state.eager_reason:
            lines.append(f"  runs eagerly: {state.eager_reason}")
        for k, e in enumerate(state.entries):
            lines += _entry(k, e)
    lines += _dispatch()
    if jf._value_paths:
        lines.append("\nvalues the traces read (each call's key holds them: a change traces again): "
                     + ", ".join(str(p) + (" (an int that changed: a symbol, keyed by its type)" if p in jf._held_ints
                                           else " (a float that changed: a runtime scalar, keyed by its type)"
                                           if p in jf._held_floats else "") for p in jf._value_paths))
    if jf._unguarded:
        lines.append("read but not keyed (a change to them is not seen): " + ", ".join(jf._unguarded))
    if jf._changed:
        lines.append("changed by the function while it was traced (its Python side effects run only then; "
                     "not keyed): " + ", ".join(jf._changed))
    if jf._saving:
        lines.append(f"\n{jf._saving}")
    if jf.log:
        lines.append("\nrecompiles and fallbacks:")
        lines += ["  " + x for x in jf.log]
    return "\n".join(lines)


def _entry(k: int, e: CompiledEntry) -> list[str]:
    lines = [f"  entry {k}:" + (" (a saved trace from the disk cache: not traced in this process)"
                                if e.saved is not None else "")]
    sm = e.summary()
    lines.append("    guards:" + ("" if e.guards.checks else " none (every shape of this signature)"))
    lines += ["      " + g for g in e.guards.describe()]
    if sm.dims:
        lines.append("    dims: " + ", ".join(sm.dims))
    if sm.checks:
        lines.append("    checked where the size is made (a data-dependent size, a traced index; a call "
                     "deciding otherwise runs elsewhere):")
        lines += ["      " + x for x in sm.checks]
    if sm.eager_nodes:
        lines.append("    eager nodes (run in numpy between traced segments):")
        lines += ["      " + x for x in sm.eager_nodes]
    if sm.breaks:
        lines.append("    graph breaks (this entry serves calls that decide the same way):")
        lines += ["      " + text for _, text in sm.breaks]
    if sm.selects:
        lines.append("    selects (an if on a traced value, both branches traced: no graph break):")
        lines += ["      " + x for x in sm.selects]
    if sm.scans:
        lines.append("    scans (a loop's body compiled once, run per trip: every trip count, one compile):")
        lines += ["      " + x for x in sm.scans]
        bodies = {id(call.body): call for call in scans_of(e.executable.portable)}  # (one a loop's body)
        ways = [x for call in bodies.values() for x in call.describe()]
        if ways:
            lines.append("    how the scans' calls run their trips (the faster of the body jitted and the body as "
                         f"plain Python and numpy, measured on {RACE_CALLS} calls each):")
            lines += ["      " + x for x in ways]
    if sm.lift_refusals:
        lines.append("    loops traced as written (jit/lift.py could not compile them whole):")
        lines += ["      " + x for x in sm.lift_refusals]
    lines.append("    graph:")
    lines += ["      " + x for x in sm.graph.splitlines()]
    if sm.plan is not None:
        lines.append("    clusters (after passes):")
        lines += ["      " + x for x in sm.plan.splitlines()]
    if e.executable.products:
        lines.append("    products on its last call: " + ", ".join(
            f"%{vid} on {_VARIANT[g]}" for vid, g in sorted(e.executable.products.items())))
    return lines


def _dispatch() -> list[str]:
    """The product dispatch of this process (the same for every function)."""
    trees = gemm_dispatch()
    if trees:
        lines = ["\nproduct dispatch calibrated on this CPU (runtime/dispatch.py; a shape class not "
                 "seen yet takes the tree's variant):"]
        for char, tree in trees.items():
            lines.append(f"  {np.dtype(char).name}:")
            lines += ["    " + x for x in describe_tree(tree)]
        return lines
    if calibrating():
        return ["\nproduct dispatch: this CPU is being calibrated in the background; until then a shape "
                "class not seen yet is raced on its first product"]
    return []

"""Prometheus metrics, prefix `shapejit_`, labelled by function name only
(and small fixed reason/level/stage sets; never a shape): functions that
share a name report one series, their sum.

The hot path only bumps plain Python counters on a FunctionMetrics (a few
hundred nanoseconds); a Collector turns them into metric families when
Prometheus scrapes.  `serve()` starts a /metrics endpoint, `wsgi_app()`
returns one to mount, and either takes a custom registry.
"""
from __future__ import annotations

import bisect
import logging
import weakref

from prometheus_client import REGISTRY, CollectorRegistry, make_wsgi_app, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from shapes import config, forksafe

LATENCY_BOUNDS = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,
                  0.25, 0.5, 1.0, 2.5)
COMPILE_BOUNDS = (1e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RECOMPILE_REASONS = ("guard", "signature", "auto_dynamic", "graph_break", "value_changed")
FALLBACK_REASONS = ("data_dependent", "unsupported_input", "max_entries", "eager_size_changed",
                    "compile_failed", "aliased_arguments", "internal_error", "graph_break_outcomes",
                    "lifted_loop", "scan_changed", "errstate", "python_state", "int_of_float", "numpy_raised")
STAGES = ("trace", "passes", "codegen", "llvm", "load")
# (level, artifact) of a compile cache hit: object code this process holds,
# else a saved trace with its object code or object code alone, from disk or Redis
CACHE_HITS = (("memory", "object"), ("disk", "trace"), ("disk", "object"), ("remote", "trace"),
              ("remote", "object"))

log = logging.getLogger("shapejit")


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds):
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def add(self, other: "Histogram") -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.sum += other.sum

    def observe(self, x: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, x)] += 1
        self.sum += x

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self):
        out, acc = [], 0
        for b, c in zip(self.bounds, self.counts):
            acc += c
            out.append((repr(float(b)), acc))
        out.append(("+Inf", acc + self.counts[-1]))
        return out


class FunctionMetrics:
    """Plain counters for one jitted function."""

    _COUNTS = ("slow_calls", "traces", "compiles", "slow_entry_hits", "entry_misses", "cache_misses",
               "eager_calls", "graph_breaks", "bytes_allocated")
    _BY_LABEL = ("recompiles", "cache_hits", "fallbacks")

    def __init__(self, name: str, live: bool = True):
        self.name = name
        # A call served by a compiled entry only observes its latency: that
        # observation is also its count as a call and as an entry hit.
        self.slow_calls = 0
        self.traces = 0
        self.compiles = 0
        self.recompiles = dict.fromkeys(RECOMPILE_REASONS, 0)
        # Two caches, named apart: the compiled entries this process holds
        # (a call's first lookup), and the compile cache (object code this
        # process holds, then disk, then Redis) a call no entry served may
        # load from: a saved trace with its object code (neither traced nor
        # compiled; disk or remote), or object code after a trace (not
        # compiled).
        self.slow_entry_hits = 0
        self.entry_misses = 0
        self.cache_hits = dict.fromkeys(CACHE_HITS, 0)
        self.cache_misses = 0  # object code looked up there and compiled
        self.fallbacks = dict.fromkeys(FALLBACK_REASONS, 0)
        self.eager_calls = 0
        self.graph_breaks = 0  # data-dependent Python decisions traced (each compiled on both sides)
        self.latency = Histogram(LATENCY_BOUNDS)
        self.compile_seconds = {s: Histogram(COMPILE_BOUNDS) for s in STAGES}
        self.bytes_allocated = 0
        self.peak_bytes = 0
        if live:
            _live.add(self)

    @classmethod
    def total(cls, ms: list) -> "FunctionMetrics":
        """The figures of functions that share a name, as one (a metric's
        series are one per name: two would be a duplicate)."""
        if len(ms) == 1:
            return ms[0]
        t = cls(ms[0].name, live=False)
        for m in ms:
            for k in cls._COUNTS:
                setattr(t, k, getattr(t, k) + getattr(m, k))
            for k in cls._BY_LABEL:
                mine = getattr(t, k)
                for label, n in getattr(m, k).items():
                    mine[label] += n
            t.latency.add(m.latency)
            for s, h in m.compile_seconds.items():
                t.compile_seconds[s].add(h)
            t.peak_bytes = max(t.peak_bytes, m.peak_bytes)
        return t

    @property
    def calls(self) -> int:
        return self.slow_calls + self.latency.count

    @property
    def entry_hits(self) -> int:
        return self.slow_entry_hits + self.latency.count

    def cache_hits_at(self, level: str) -> int:
        return sum(n for (lv, _), n in self.cache_hits.items() if lv == level)


_live: "weakref.WeakSet[FunctionMetrics]" = weakref.WeakSet()


class ShapejitCollector:
    def collect(self):
        by_name: dict[str, list] = {}
        for m in list(_live):
            by_name.setdefault(m.name, []).append(m)
        fms = [FunctionMetrics.total(by_name[name]) for name in sorted(by_name)]

        def counter(name, doc, value_of, extra=()):
            fam = CounterMetricFamily(f"shapejit_{name}", doc, labels=["function", *extra])
            for m in fms:
                if extra:
                    for k, v in value_of(m).items():
                        fam.add_metric([m.name, *((k,) if isinstance(k, str) else k)], v)
                else:
                    fam.add_metric([m.name], value_of(m))
            return fam

        yield counter("calls", "Calls of jitted functions", lambda m: m.calls)
        yield counter("traces", "Traces of jitted functions", lambda m: m.traces)
        yield counter("compiles", "Executables compiled with LLVM (cache hits excluded)", lambda m: m.compiles)
        yield counter("recompiles", "Traces after the first, by reason", lambda m: m.recompiles, ("reason",))
        yield counter("entry_hits", "Calls served by a compiled entry this process holds", lambda m: m.entry_hits)
        yield counter("entry_misses", "Calls no compiled entry served (traced, or loaded from the compile cache)",
                      lambda m: m.entry_misses)
        yield counter("cache_hits", "Compile cache hits by level (memory, disk, remote) and artifact (trace: "
                      "a saved trace with its object code, neither traced nor compiled; object: object code "
                      "after a trace, not compiled)", lambda m: m.cache_hits, ("level", "artifact"))
        yield counter("cache_misses", "Object code looked up in the compile cache and compiled",
                      lambda m: m.cache_misses)
        yield counter("fallbacks", "Eager fallbacks by reason", lambda m: m.fallbacks, ("reason",))
        yield counter("eager_calls", "Calls run eagerly in numpy", lambda m: m.eager_calls)
        yield counter("graph_breaks", "Data-dependent Python decisions traced as checked outcomes",
                      lambda m: m.graph_breaks)
        yield counter("bytes_allocated", "Bytes of arrays created by compiled executables",
                      lambda m: m.bytes_allocated)
        peak = GaugeMetricFamily("shapejit_peak_bytes", "Largest live bytes of one call", labels=["function"])
        for m in fms:
            peak.add_metric([m.name], m.peak_bytes)
        yield peak
        lat = HistogramMetricFamily("shapejit_call_seconds", "Latency of calls served by a compiled entry",
                                    labels=["function"])
        for m in fms:
            lat.add_metric([m.name], m.latency.buckets(), m.latency.sum)
        yield lat
        comp = HistogramMetricFamily("shapejit_compile_seconds", "Compile time by stage",
                                     labels=["function", "stage"])
        for m in fms:
            for stage, h in m.compile_seconds.items():
                comp.add_metric([m.name, stage], h.buckets(), h.sum)
        yield comp
        from runtime.cache import default_cache
        cache = default_cache()
        yield GaugeMetricFamily("shapejit_cache_entries", "Entries in the persistent compile cache",
                                value=len(cache))
        yield GaugeMetricFamily("shapejit_cache_bytes", "Bytes of the persistent compile cache on disk",
                                value=cache.volume())
        rejected = CounterMetricFamily("shapejit_cache_rejected", "Cache records not loaded (damaged, pickled, "
                                       "bound to another key, unsigned or badly signed)", labels=["reason"])
        for reason, n in sorted(cache.stats.rejected.items()):
            rejected.add_metric([reason], n)
        yield rejected
        from runtime.remote import current_tier
        tier = current_tier()
        if tier is not None:
            errors = CounterMetricFamily("shapejit_remote_cache_errors", "Failures of the remote cache tier by kind "
                                         "(unreachable, timeout, full, error)", labels=["kind"])
            for kind, n in sorted(tier.errors.items()):
                errors.add_metric([kind], n)
            yield errors
            yield GaugeMetricFamily("shapejit_remote_cache_up", "Whether the remote cache tier is in use now",
                                    value=int(tier.up))
            hits = CounterMetricFamily("shapejit_remote_cache_requests", "Remote cache reads and writes",
                                       labels=["result"])
            for result, n in (("hit", tier.hits), ("miss", tier.misses), ("write", tier.writes)):
                hits.add_metric([result], n)
            yield hits
        from runtime import dispatch
        calibrations = CounterMetricFamily("shapejit_gemm_calibrations", "Background calibrations of the GEMM "
                                           "dispatch on this CPU (started here; installed; failed)",
                                           labels=["outcome"])
        for outcome, n in dispatch.EVENTS.items():
            calibrations.add_metric([outcome], n)
        yield calibrations
        from runtime.bufferpool import pool_bytes
        yield GaugeMetricFamily("shapejit_pool_bytes", "Bytes held by the intermediate-buffer pools",
                                value=pool_bytes())


_registered: set[int] = set()
_reg_lock = forksafe.lock()
_collector = ShapejitCollector()


def register(registry: CollectorRegistry | None = None) -> CollectorRegistry:
    registry = REGISTRY if registry is None else registry
    with _reg_lock:
        if id(registry) not in _registered:
            registry.register(_collector)
            _registered.add(id(registry))
    return registry


def serve(port: int, addr: str = "127.0.0.1", registry: CollectorRegistry | None = None):
    """Start an HTTP server with /metrics on addr:port (a daemon thread)."""
    reg = register(registry)
    return start_http_server(port, addr=addr, registry=reg)


def wsgi_app(registry: CollectorRegistry | None = None):
    return make_wsgi_app(register(registry))


# -------------------------------------------------------------- logging

def log_topics() -> frozenset:
    return frozenset(config.get("SHAPEJIT_LOG"))


def logger_for(topic: str):
    """The shapejit logger when SHAPEJIT_LOG names `topic` (else None)."""
    if topic not in log_topics() and "all" not in log_topics():
        return None
    if not log.handlers:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("shapejit %(levelname)s: %(message)s"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
    return log

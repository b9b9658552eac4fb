"""The measurements.  Each ``run_*`` returns plain data for ``report``.

Cell results are dicts ``{"status", "time", "note", "noisy", "busy"}``: time
in seconds (or None), a note for the report, and two flags from the harness
(wide spread of samples; other processes busy meanwhile).  Status is one of:

* ``ok``     timed; ``time`` is the median seconds per call
* ``n/a``    the peer's library is not importable
* ``—``      the peer has no implementation of this workload
* ``WRONG``  the output disagreed with numpy (not timed)
* ``ERR``    building, converting or calling raised (not timed)
"""

from __future__ import annotations

import time

import numpy as np

from . import harness
from . import workloads as W

NOISY = 0.25  # interquartile range / median above which a cell is marked noisy
RTOL = 1e-3
ATOL = 1e-4   # scaled by max(1, max|ref|)


def check(out, ref):
    """None if ``out`` agrees with ``ref`` within float32 tolerance, else why not."""
    out = np.asarray(out)
    if out.shape != ref.shape:
        return "shape %s, expected %s" % (out.shape, ref.shape)
    if out.dtype != ref.dtype:
        return "dtype %s, expected %s" % (out.dtype, ref.dtype)
    atol = ATOL * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0)
    if not np.allclose(out, ref, rtol=RTOL, atol=atol):
        bad = ~np.isclose(out, ref, rtol=RTOL, atol=atol)
        err = np.nanmax(np.abs(out.astype(np.float64) - ref)) if out.size else 0.0
        return "%d of %d elements differ (max abs err %.3g)" % (bad.sum(), bad.size, err)
    return None


def short_error(e: BaseException, limit: int = 160) -> str:
    """One line of an exception: type and the first meaningful line of text."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = "%s: %s" % (type(e).__name__, lines[0] if lines else "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cell(status, time=None, note="", noisy=False, busy=False):
    return {"status": status, "time": time, "note": note, "noisy": noisy, "busy": busy}


# ---------------------------------------------------------------- 1. steady


def run_steady(peers, workload_sizes, budget, log):
    """Median latency of every (workload, size, peer).

    One function is built per (peer, workload) and reused for every size, so
    the shape-specialising peers (jax.jit, shapejit-static) compile once per
    size inside the warm-up, and the dynamic ones should compile once.
    Returns ``(rows, jit_stats)``; ``jit_stats[peer][workload]`` holds the
    shapejit ``stats()`` after all sizes.
    """
    rows, jit_stats = [], {}
    for name, sizes in workload_sizes.items():
        fn, make = W.WORKLOADS[name]
        built = {p.name: _build(p, name) for p in peers}

        for size in sizes:
            inputs = make(size, np.random.default_rng(0))
            ref = fn(*inputs)
            row = {"workload": name, "size": size, "label": W.size_label(name, size), "cells": {}}
            for group in _groups(peers):
                ready = [p for p in group if not isinstance(built[p.name], dict)]
                for p in group:
                    if p not in ready:           # n/a, —, or a build error
                        row["cells"][p.name] = built[p.name]
                row["cells"].update(_time_cells(ready, [built[p.name] for p in ready], inputs, ref, budget))
                for p in group:
                    log("  %-10s %-12s %-16s %s" % (name, row["label"], p.name, _fmt_log(row["cells"][p.name])))
            rows.append(row)
        for p in peers:
            if hasattr(p, "stats") and not isinstance(built[p.name], dict):
                jit_stats.setdefault(p.name, {})[name] = p.stats(built[p.name])
    return rows, jit_stats


# Pause before timing a cell: the peer timed just before may leave threads
# spinning in this process (XLA's and OpenMP's pools wait busily for more
# work for a while), which the foreign-load check cannot see.
SETTLE_S = 0.25


def _build(p, workload):
    """The peer's function for `workload`, or the cell saying why there is
    none (n/a: not installed, —: no implementation, ERR: building raised)."""
    if not p.available():
        return cell("n/a", note=p.reason)
    try:
        f = p.build(workload)
    except Exception as e:
        return cell("ERR", note="build: " + short_error(e))
    return f if f is not None else cell("—")


# peers timed together, their samples interleaved: the dyn/static column
# is the ratio of two measurements taken over the same seconds
PAIRED = ("shapejit-dyn", "shapejit-static")


def _groups(peers):
    """The peers in order, the PAIRED ones as one group (where the first is)."""
    paired = [p for p in peers if p.name in PAIRED]
    groups = []
    for p in peers:
        if p.name not in PAIRED:
            groups.append([p])
        elif p is paired[0]:
            groups.append(paired)
    return groups


def _time_cells(ps, fs, inputs, ref, budget) -> dict:
    """Cells of the peers `ps` (functions `fs`): each checked against numpy,
    then the correct ones timed together."""
    cells, timed = {}, []
    for p, f in zip(ps, fs):
        try:
            args = p.convert(inputs)
            out = p.run(f, args)              # first call: compiles where relevant
            why = check(p.to_numpy(out), ref)
            if why:
                cells[p.name] = cell("WRONG", note=why)
            else:
                timed.append((p, (lambda p=p, f=f, args=args: p.run(f, args))))
        except Exception as e:
            cells[p.name] = cell("ERR", note=short_error(e))
    if timed:
        time.sleep(SETTLE_S)
        try:
            ts = harness.measure_interleaved([call for _, call in timed], budget)
        except Exception as e:
            return {**cells, **{p.name: cell("ERR", note=short_error(e)) for p, _ in timed}}
        for (p, _), t in zip(timed, ts):
            cells[p.name] = cell("ok", t.median, noisy=t.spread > NOISY, busy=t.foreign_load > harness.BUSY)
    return cells


def _fmt_log(c):
    if c["status"] == "ok":
        return "%.4g ms" % (c["time"] * 1e3)
    return c["status"] + (" " + c["note"] if c["note"] else "")


# ---------------------------------------------------------------- 2. machine


def run_machine_limits(quick, log, earlier=None):
    """STREAM-like copy bandwidth and float32 GEMM rate of this machine.

    These are best-case figures, so when ``earlier`` limits are given (the
    run measures once at its start and once at its end, to dodge a busy
    neighbour) the better of the two is kept for each.
    """
    meter = harness.LoadMeter().start()
    n = 64 * 1024 * 1024                     # 256 MB of float32
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)                      # fault the pages in
    t = harness.best_of(lambda: np.copyto(dst, src), 5 if quick else 10)
    bandwidth = 2 * src.nbytes / t           # bytes read + written
    log("  copy bandwidth %.1f GB/s" % (bandwidth / 1e9))

    m = 2048
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, m), dtype=np.float32)
    b = rng.standard_normal((m, m), dtype=np.float32)
    c = np.empty((m, m), np.float32)
    np.matmul(a, b, out=c)
    t = harness.best_of(lambda: np.matmul(a, b, out=c), 3 if quick else 5)
    gflops = 2 * m ** 3 / t / 1e9
    log("  numpy f32 GEMM %.1f GFLOP/s" % gflops)
    now = {"copy_bandwidth": bandwidth, "gemm_gflops": gflops,
           "foreign_load": meter.stop()}
    if earlier is None:
        return now
    return {"copy_bandwidth": max(bandwidth, earlier["copy_bandwidth"]),
            "gemm_gflops": max(gflops, earlier["gemm_gflops"]),
            "foreign_load": min(now["foreign_load"], earlier["foreign_load"])}


def matmul_flops(name, size):
    """Floating-point operations of the matmuls in a workload (2*m*n*k each)."""
    D, F, H, Dh = W.D_MODEL, W.D_FF, W.N_HEADS, W.D_HEAD
    if name == "mlp":
        return 2 * size * D * F * 2
    if name == "attention":
        return 2 * H * size * size * Dh * 2
    if name == "bert_layer":
        B, S = size
        t = B * S
        return 2 * t * D * D * 4 + 2 * B * H * S * S * Dh * 2 + 2 * t * D * F * 2
    return 0


# ---------------------------------------------------------------- 4. tiny


def run_tiny(peers, budget, log):
    """Per-call time of gelu_bias on a 1x8 input: dispatch overhead."""
    x = np.random.default_rng(0).standard_normal((1, 8), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((8,), dtype=np.float32)
    ref = W.gelu_bias(x, b)
    out = {}
    for p in peers:
        f = _build(p, "gelu_bias")
        out[p.name] = f if isinstance(f, dict) else _time_cells([p], [f], (x, b), ref, budget)[p.name]
        log("  tiny %-16s %s" % (p.name, _fmt_log(out[p.name])))
    return out


# ---------------------------------------------------------------- 3 and 5: fresh processes

FIRST_PEERS = ("torch.compile", "jax.jit", "shapejit-dyn")
STREAM_PEERS = ("numpy", "torch", "torch.compile", "jax.jit",
                "shapejit-dyn", "shapejit-static", "shapejit-auto")


def run_first_compile(peers, tmp_root, log, timeout):
    """First call of a fresh bert_layer (B=1, S=128): cold, then warm disk cache."""
    from .coldstart import run_child
    out = {}
    for p in peers:
        if p.name not in FIRST_PEERS:
            continue
        if not p.available():
            out[p.name] = {"cold": {"status": "n/a", "note": p.reason}}
            continue
        cache = tmp_root / ("first-" + p.name)
        runs = {}
        # (shapejit's first process on a machine, too: nothing in its cache, the
        # GEMM and pool libraries compiled in the call)
        kinds = ("cold", "warm") + (("empty",) if p.name.startswith("shapejit") else ())
        for kind in kinds:
            where = cache if kind != "empty" else tmp_root / ("empty-" + p.name)
            runs[kind] = run_child("first", p.name, where, jax_persistent=True, timeout=timeout,
                                   machine=kind != "empty")
            r = runs[kind]
            log("  first call %-14s %-4s %s" % (p.name, kind, "%.3f s" % r["first"]
                                                  if r["status"] == "ok" else r["status"] + " " + r.get("note", "")))
            if r["status"] != "ok":
                break
        out[p.name] = runs
    return out


def run_stream(peers, calls, tmp_root, log, timeout, check):
    """``calls`` bert_layer calls of random length, each peer in a fresh process."""
    from .coldstart import run_child
    out = {}
    names = [p.name for p in peers]
    extra = [] if "shapejit-dyn" not in names else ["shapejit-auto"]
    for name in [n for n in STREAM_PEERS if n in names or n in extra]:
        p = next((q for q in peers if q.name == name), None)
        if p is not None and not p.available():
            out[name] = {"status": "n/a", "note": p.reason}
            continue
        if name == "shapejit-auto":
            from .peers import ShapejitPeer
            q = ShapejitPeer("auto")
            if not q.available():
                out[name] = {"status": "n/a", "note": q.reason}
                continue
        r = run_child("stream", name, tmp_root / ("stream-" + name), calls=calls, check=check,
                      timeout=timeout)
        out[name] = r
        log("  stream %-16s %s" % (name, "total %.2f s, first %.2f s, compiles %s"
                                    % (r["total"], r["first"], r["compiles"])
                                    if r["status"] == "ok" else r["status"] + " " + r.get("note", "")))
    return out

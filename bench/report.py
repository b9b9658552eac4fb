"""Markdown report from the plain data that ``suite`` returns."""

from __future__ import annotations

import datetime
import os
import platform

import numpy as np

from . import workloads as W
from .harness import BUSY
from .suite import matmul_flops

LEGEND = ("Cells: median time per call (speedup = numpy time / this time); `~` marks a "
          "noisy cell (interquartile range over 25%% of the median), `!` a cell measured while "
          "other processes kept more than %.1f cores busy, even after retrying. "
          "`n/a` library not importable, `—` no implementation for this workload, "
          "`WRONG` output disagrees with numpy (not timed), `ERR` raised (see notes)." % BUSY)


def fmt_time(s):
    if s is None:
        return "?"
    if s < 1e-3:
        return "%.3g µs" % (s * 1e6)
    if s < 1:
        return "%.3g ms" % (s * 1e3)
    return "%.3g s" % s


def fmt_ratio(r):
    return "?" if r is None else ("%.2f×" % r if r < 10 else "%.3g×" % r)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |",
           "|" + "|".join("---" if i < 2 else "--:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


class Notes:
    """Numbered footnotes, deduplicated."""

    def __init__(self):
        self.items = []

    def add(self, text):
        if text not in self.items:
            self.items.append(text)
        return "[%d]" % (self.items.index(text) + 1)


def _cell_text(c, base, notes, where):
    st = c["status"]
    if st == "ok":
        txt = ("!" if c.get("busy") else "") + ("~" if c.get("noisy") else "") + fmt_time(c["time"])
        if base:
            txt += " (%s)" % fmt_ratio(base / c["time"])
        return txt
    if st in ("WRONG", "ERR"):
        return "**%s** %s" % (st, notes.add("%s: %s" % (where, c["note"])))
    return st


# ---------------------------------------------------------------- sections


def header(meta):
    lines = ["# shapejit benchmark", "",
             "- mode: %s, %s" % (meta["mode"], meta["date"]),
             "- machine: %s, %s logical cores, L3 %s, Python %s, numpy %s" % (
                 meta["cpu"], meta["cores"], meta["l3"], meta["python"], np.__version__),
             "- peers: " + ", ".join("%s %s" % kv for kv in meta["versions"].items()),
             "- total run time: %.0f s; other processes kept on average %.2f cores busy meanwhile"
             % (meta["elapsed"], meta["foreign_load"]), ""]
    return "\n".join(lines)


def steady_section(rows, peer_names, notes):
    if not rows:
        return ""
    head = ["workload", "size"] + peer_names + ["shapejit dyn/static"]
    body = []
    for r in rows:
        cells = r["cells"]
        base = cells.get("numpy", {}).get("time")
        line = [r["workload"], r["label"]]
        for n in peer_names:
            line.append(_cell_text(cells[n], base, notes, "%s %s %s" % (r["workload"], r["label"], n)))
        d, s = cells.get("shapejit-dyn", {}), cells.get("shapejit-static", {})
        line.append(fmt_ratio(d["time"] / s["time"])
                    if d.get("status") == "ok" and s.get("status") == "ok" else "n/a")
        body.append(line)
    return "\n".join([
        "## 1. Steady-state latency", "",
        LEGEND + " The last column is shapejit dynamic=True time / dynamic=False "
        "time (1.00× = no cost for being shape-generic); the two are timed together, "
        "their samples interleaved, so the ratio does not drift with the machine's load.", "",
        table(head, body), ""])


def bounds_section(limits, rows, peer_names):
    if not limits:
        return ""
    bw, gf = limits["copy_bandwidth"], limits["gemm_gflops"]
    busy = ("; **other processes kept %.1f cores busy even then**, so these are low"
            % limits["foreign_load"] if limits["foreign_load"] > BUSY else "")
    out = ["## 2. Machine limits", "",
           "Best of several trials, measured at the start and at the end of the run%s." % busy, "",
           "- copy bandwidth (np.copyto of 256 MB float32, bytes read + written): "
           "**%.1f GB/s**" % (bw / 1e9),
           "- numpy float32 GEMM 2048³: **%.1f GFLOP/s**" % gf, ""]

    mem = [r for r in rows if r["workload"] in ("gelu_bias", "layernorm", "softmax") and r["size"] == 4096]
    if mem:
        out += ["### Memory-bound kernels at T=4096", "",
                "bound = (bytes in + bytes out) / copy bandwidth; cells are time / bound "
                "(1.00× = at the copy bandwidth). Data that fits in the L3 cache can stay "
                "there between repeats, so an implementation may beat the bound.", ""]
        body = []
        for r in mem:
            nbytes = W.io_bytes(r["workload"], r["size"])
            bound = nbytes / bw
            line = [r["workload"], "%.1f MB" % (nbytes / 1e6), fmt_time(bound)]
            for n in peer_names:
                c = r["cells"][n]
                line.append(fmt_ratio(c["time"] / bound) if c["status"] == "ok" else c["status"])
            body.append(line)
        out += [table(["workload", "bytes", "bound"] + peer_names, body), ""]

    mm = {}
    for r in rows:                       # largest measured size of each matmul workload
        if matmul_flops(r["workload"], r["size"]):
            mm[r["workload"]] = r
    if mm:
        out += ["### Matmul-heavy workloads at their largest measured size", "",
                "bound = matmul FLOPs / numpy GEMM rate; cells are time / bound "
                "(1.00× = every FLOP at the 2048³ GEMM rate).", ""]
        body = []
        for r in mm.values():
            flops = matmul_flops(r["workload"], r["size"])
            bound = flops / (gf * 1e9)
            line = [r["workload"] + " " + r["label"], "%.2f GFLOP" % (flops / 1e9), fmt_time(bound)]
            for n in peer_names:
                c = r["cells"][n]
                line.append(fmt_ratio(c["time"] / bound) if c["status"] == "ok" else c["status"])
            body.append(line)
        out += [table(["workload", "FLOPs", "bound"] + peer_names, body), ""]
    return "\n".join(out)


def _jit_detail(res):
    st = res.get("stats") or {}
    keys = ("recompiles", "fallbacks", "cache_hits_disk", "entry_hits")
    return ", ".join("%s %s" % (k, st[k]) for k in keys if k in st)


def stream_section(stream, calls, notes):
    if not stream:
        return ""
    base = stream.get("numpy", {}).get("total") if stream.get("numpy", {}).get("status") == "ok" else None
    body = []
    for name, r in stream.items():
        if r["status"] != "ok":
            mark = notes.add("stream %s: %s" % (name, r.get("note", ""))) if r["status"] == "ERR" else ""
            body.append([name, r["status"] + (" " + mark if mark else "")] + [""] * 5)
            continue
        rest = r["total"] - r["first"]
        wrong = ""
        if r["wrong"]:
            wrong = " **WRONG** " + notes.add("stream %s: %d wrong outputs, e.g. %s"
                                              % (name, len(r["wrong"]), r["wrong"][0]))
        busy = "!" if r.get("foreign_load", 0) > BUSY else ""
        body.append([name, busy + fmt_time(r["total"]) + wrong,
                     fmt_ratio(base / r["total"]) if base else "?",
                     fmt_time(r["first"]), fmt_time(rest / max(1, len(r["times"]) - 1)),
                     r["compiles"] if r["compiles"] is not None else "—",
                     _jit_detail(r)])
    ok = [r for r in stream.values() if r.get("status") == "ok"]
    shapes = ok[0]["distinct_shapes"] if ok else "?"
    checked = max((r.get("checked", 0) for r in ok), default=0)
    return "\n".join([
        "## 3. Stream: %d calls of bert_layer, B=1, S uniform in 1..512" % calls, "",
        "Same S sequence for every implementation (seed 1234, %s distinct lengths); "
        "after timing, %d of the outputs (first, shortest, longest and a spread) are "
        "checked against numpy. Each "
        "implementation runs in a fresh process with empty on-disk compile caches (shapejit's holding only "
        "what it keeps per machine: this CPU's calibrated GEMM dispatch and the GEMM and thread-pool libraries, "
        "as on a machine that has run shapejit before), so "
        "the first call includes one-time compiler start-up. Compile counts: shapejit "
        "`stats()['compiles']`, jax.jit `_cache_size()`, torch.compile dynamo "
        "`counters['stats']['unique_graphs']`. jax's persistent cache is left off "
        "(its default); inductor's and shapejit's on-disk caches are on (theirs). "
        "`!`: other processes kept more than %.1f cores busy during that run."
        % (shapes, checked, BUSY), "",
        table(["impl", "total", "speedup", "first call", "mean of the rest", "compiles", "shapejit stats"],
              body), ""])


def tiny_section(tiny, notes):
    if not tiny:
        return ""
    base = tiny.get("numpy", {}).get("time") if tiny.get("numpy", {}).get("status") == "ok" else None
    body = []
    for name, c in tiny.items():
        if c["status"] == "—":
            continue
        over = fmt_time(c["time"] - base) if c["status"] == "ok" and base else ""
        if over and c["time"] < base:
            over = "-" + fmt_time(base - c["time"])
        body.append([name, _cell_text(c, None, notes, "tiny " + name), over])
    sj = tiny.get("shapejit-dyn", {})
    if sj.get("status") == "ok" and base:
        d = sj["time"] - base
        verdict = ("shapejit-dyn adds **%s** per call over numpy." % fmt_time(d) if d >= 0 else
                   "shapejit-dyn is **%s** per call faster than numpy (no added overhead)." % fmt_time(-d))
    else:
        verdict = "shapejit-dyn: %s." % sj.get("status", "not run")
    return "\n".join([
        "## 4. Tiny call: gelu_bias on a 1x8 input", "",
        "Median per-call time over batches of back-to-back calls; added = impl - numpy. " + verdict, "",
        table(["impl", "per call", "added vs numpy"], body), ""])


def first_section(first, notes):
    if not first:
        return ""
    body = []
    for name, runs in first.items():
        cold, warm = runs.get("cold", {}), runs.get("warm", {})
        if cold.get("status") != "ok":
            mark = notes.add("first call %s: %s" % (name, cold.get("note", ""))) if cold.get("status") == "ERR" else ""
            body.append([name, cold.get("status", "?") + (" " + mark if mark else ""), "", "", "", "", "", ""])
            continue
        wrong = " **WRONG** " + notes.add("first call %s: %s" % (name, cold["wrong"])) if cold.get("wrong") else ""
        warm_txt = fmt_time(warm["first"]) if warm.get("status") == "ok" else warm.get("status", "")
        empty = runs.get("empty")
        empty_txt = "—" if empty is None else fmt_time(empty["first"]) if empty.get("status") == "ok" else \
            empty.get("status", "")
        busy = "!" if cold.get("foreign_load", 0) > BUSY else ""
        body.append([name, busy + fmt_time(cold["first"]) + wrong, empty_txt, fmt_time(cold["steady"]),
                     fmt_time(cold["first"] - cold["steady"]), warm_txt,
                     cold["compiles"] if cold["compiles"] is not None else "—",
                     (warm.get("stats") or {}).get("cache_hits_disk", "—")])
    return "\n".join([
        "## 5. First call of a fresh bert_layer, B=1, S=128", "",
        "Fresh process each. cold: empty on-disk caches (shapejit's holding only what it keeps per machine: "
        "this CPU's calibrated GEMM dispatch and the GEMM and thread-pool libraries compiled once per machine, "
        "as on a machine that has run shapejit before); empty cache: shapejit's first process on a machine "
        "(those libraries compiled in the call); warm disk: a second process "
        "reusing the caches the cold run filled (jax's persistent compilation cache "
        "enabled for both runs here). compile overhead = cold first call - steady call. "
        "`!`: other processes kept more than %.1f cores busy during the cold run." % BUSY, "",
        table(["impl", "first call (cold)", "first call (empty cache)", "steady call", "compile overhead",
               "first call (warm disk)", "compiles", "shapejit disk hits (warm)"], body), ""])


def jit_stats_section(jit_stats):
    if not jit_stats:
        return ""
    keys = ["traces", "compiles", "recompiles", "entry_hits", "cache_hits_disk", "fallbacks"]
    body = []
    for peer, per_w in jit_stats.items():
        for w, st in per_w.items():
            body.append([peer, w] + [st.get(k, "?") for k in keys])
    return "\n".join(["### shapejit stats after the steady runs (all sizes of a workload share one function)", "",
                      table(["impl", "workload"] + keys, body), ""])


def render(meta, steady_rows, peer_names, jit_stats, limits, stream, calls, tiny, first, extra_notes):
    notes = Notes()
    parts = [header(meta),
             steady_section(steady_rows, peer_names, notes),
             jit_stats_section(jit_stats),
             bounds_section(limits, steady_rows, peer_names),
             stream_section(stream, calls, notes),
             tiny_section(tiny, notes),
             first_section(first, notes)]
    for n in extra_notes:
        notes.add(n)
    if notes.items:
        parts += ["## Notes", ""] + ["%d. %s" % (i + 1, n.replace("\n", " ").replace("|", "\\|"))
                                     for i, n in enumerate(notes.items)] + [""]
    return "\n".join(p for p in parts if p)


def cpu_description() -> str:
    """The CPU every figure is measured on: its model, LLVM's name for it,
    and whether it has AVX-512 (the machines change; kernels choose by
    the host's features)."""
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import llvmlite.binding as llvm  # (a runtime dependency of shapejit)
    llvm.initialize_native_target()
    avx512 = llvm.get_host_cpu_features().get("avx512f", False)
    from shapes import host
    forced = f", SHAPEJIT_ISA={host.forced()} forced" if host.forced() else ""
    return f"{model} (LLVM: {llvm.get_host_cpu_name()}, {'with' if avx512 else 'no'} AVX-512{forced}){blas_kernels()}"


def blas_kernels() -> str:
    """Which kernels numpy's OpenBLAS runs: its own choice for the host, or
    the one OPENBLAS_CORETYPE forces (`Haswell`: the AVX2 kernels even on an
    AVX-512 host, 1.5x slower there; some machines set it in the
    environment).  "" when neither is known."""
    forced = os.environ.get("OPENBLAS_CORETYPE")
    try:
        import threadpoolctl  # (bench's extra: the kernels OpenBLAS actually loaded)
        arch = ",".join(str(i.get("architecture")) for i in threadpoolctl.threadpool_info()
                        if i.get("internal_api") == "openblas")
    except ImportError:
        arch = ""
    if not arch and not forced:
        return ""
    return (f"; numpy's OpenBLAS on its {arch or '?'} kernels"
            + (f" (OPENBLAS_CORETYPE={forced})" if forced else " (its own choice)"))


def machine_meta(mode, elapsed, versions, foreign_load):
    cpu = cpu_description()
    try:
        with open("/sys/devices/system/cpu/cpu0/cache/index3/size") as f:
            kib = int(f.read().strip().rstrip("K"))
        l3 = "%d MiB" % (kib // 1024) if kib % 1024 == 0 else "%d KiB" % kib
    except OSError:
        l3 = "?"
    return {"mode": mode, "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "cpu": cpu, "cores": os.cpu_count(), "l3": l3, "python": platform.python_version(),
            "versions": versions, "elapsed": elapsed, "foreign_load": foreign_load}

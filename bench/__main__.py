"""python -m bench [--quick] [--only WORKLOAD[,..]] [--peers IMPL[,..]] [--out FILE.md] [--models]
python -m bench --corpus [--preset S,M] [--only KERNEL,..] [--repeats N]: the NPBench-style corpus (corpus_run.py)

Runs the measurements (progress on stderr), prints the markdown report on
stdout and writes it to --out.  Sections:

1. steady latency of every workload x size x implementation
2. machine limits (copy bandwidth, GEMM rate) and the bounds they imply
3. a stream of bert_layer calls with random sequence length (fresh processes)
4. the per-call overhead on a tiny input
5. first-call (compile) time of bert_layer, cold and with a warm disk cache

A section whose workload is excluded by --only is skipped (tiny call needs
gelu_bias; stream and first call need bert_layer).  shapejit compiles into a
compile cache of its own for the run (sections 3 and 5 use fresh ones per
process), so its counts do not depend on earlier runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

from . import harness, report, suite
from . import workloads as W
from .peers import all_peers

RESULTS = Path(__file__).resolve().parent / "results"


def versions(peers):
    out = {}
    for mod in ("numexpr", "numba", "torch", "jax", "jit"):
        label = "shapejit" if mod == "jit" else mod
        p = next((p for p in peers if p.module == mod), None)
        if p is not None and not p.available():
            out[label] = "n/a"
            continue
        try:
            out[label] = getattr(importlib.import_module(mod), "__version__", "(no version)")
        except Exception:
            out[label] = "n/a"
    return out


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="fewer sizes, shorter timing, 30-call stream (about 2-3 minutes)")
    ap.add_argument("--only", default="",
                    help="comma-separated workloads: " + ",".join(W.WORKLOADS))
    ap.add_argument("--peers", default="",
                    help="comma-separated implementations (numpy is always kept): "
                         + ",".join(p.name for p in all_peers()))
    ap.add_argument("--out", default=None,
                    help="markdown file to write (default bench/results/report[-quick].md)")
    ap.add_argument("--calls", type=int, default=None, help="stream length (default 100, quick 30)")
    ap.add_argument("--models", action="store_true",
                    help="only the whole-model section (GPT-2, Llama: bench/models), to bench/results/models.md")
    a = ap.parse_args(argv)

    a.workloads = [w.strip() for w in a.only.split(",") if w.strip()] or list(W.WORKLOADS)
    bad = [w for w in a.workloads if w not in W.WORKLOADS]
    if bad:
        ap.error("unknown workload(s) %s; choose from %s" % (bad, ", ".join(W.WORKLOADS)))
    names = [p.name for p in all_peers()]
    a.peer_names = [n.strip() for n in a.peers.split(",") if n.strip()]
    bad = [n for n in a.peer_names if n not in names]
    if bad:
        ap.error("unknown implementation(s) %s; choose from %s" % (bad, ", ".join(names)))
    if a.calls is None:
        a.calls = 30 if a.quick else 100
    if a.out is None and a.models:
        a.out = RESULTS / "models.md"
    if a.out is None:
        a.out = RESULTS / ("report-quick.md" if a.quick else "report.md")
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--corpus" in argv:
        from . import corpus_run
        return corpus_run.main([x for x in argv if x != "--corpus"])
    a = parse_args(argv)
    harness.keep_machine_artifacts()  # (this CPU's, from the user's cache: every cache below starts calibrated)
    cache_dir = tempfile.TemporaryDirectory(prefix="shapejit-bench-cache-")
    os.environ["SHAPEJIT_CACHE_DIR"] = cache_dir.name  # not the user's cache: the stats start from zero
    from runtime.cache import reset_default_cache
    reset_default_cache()
    harness.seed_machine_artifacts(cache_dir.name)
    if a.models:
        from .models.run import main as run_models
        return run_models(a.quick, a.out)
    t_start = time.perf_counter()
    load = harness.LoadMeter().start()

    def log(msg):
        print("[%5.0fs] %s" % (time.perf_counter() - t_start, msg), file=sys.stderr, flush=True)

    peers = all_peers()
    if a.peer_names:
        peers = [p for p in peers if p.name == "numpy" or p.name in a.peer_names]
    for p in peers:
        ok = p.available()
        log("%-16s %s" % (p.name, "ok" if ok else "n/a (%s)" % p.reason))
    names = [p.name for p in peers]
    notes = ["%s unavailable: %s" % (p.name, p.reason) for p in peers if not p.available()]

    budget = harness.QUICK if a.quick else harness.FULL
    sizes = W.QUICK_SIZES if a.quick else W.SIZES
    sizes = {w: sizes[w] for w in a.workloads}
    timeout = 600 if a.quick else 1800

    log("machine limits")
    limits = suite.run_machine_limits(a.quick, log)

    tiny = {}
    if "gelu_bias" in a.workloads:
        log("tiny call overhead")
        tiny_budget = harness.Budget(target=0.1 if a.quick else 0.3, min_repeats=11,
                                     max_repeats=200, min_sample=1e-3, warmup=20)
        tiny = suite.run_tiny(peers, tiny_budget, log)

    log("steady latency")
    rows, jit_stats = suite.run_steady(peers, sizes, budget, log)

    first, stream = {}, {}
    if "bert_layer" in a.workloads:
        with tempfile.TemporaryDirectory(prefix="bench-caches-") as tmp:
            log("first call, fresh processes")
            first = suite.run_first_compile(peers, Path(tmp), log, timeout)
            log("stream of %d calls, fresh processes" % a.calls)
            stream = suite.run_stream(peers, a.calls, Path(tmp), log, timeout,
                                      check=6 if a.quick else 12)

    notes += [
        "Timing: %s mode; each cell is the median of adaptive repeats (about %.2f s of samples, "
        "at least %d), taken %.2f s after the previous peer's (whose thread pools may still spin); "
        "calls shorter than %.0f µs are batched. The machine is shared and noisy: "
        "differences under ~10%% are not significant." % (
            "quick" if a.quick else "full", budget.target, budget.min_repeats, suite.SETTLE_S,
            budget.min_sample * 1e6),
        "Correctness: every implementation's output is compared with numpy at every size "
        "(np.allclose, rtol=%g, atol=%g·max(1, max|ref|), same shape and dtype) before timing."
        % (suite.RTOL, suite.ATOL),
        "Threads: torch.set_num_threads(%s), numexpr threads = cores, numba parallel=True on all "
        "cores; numpy's BLAS and XLA use their defaults." % __import__("os").cpu_count(),
    ]
    meta = report.machine_meta("quick" if a.quick else "full", time.perf_counter() - t_start,
                               versions(peers), load.stop())
    log("machine limits again")
    limits = suite.run_machine_limits(a.quick, log, earlier=limits)

    md = report.render(meta, rows, names, jit_stats, limits, stream, a.calls, tiny, first, notes)
    print(md)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    log("wrote %s" % out)


if __name__ == "__main__":
    main()

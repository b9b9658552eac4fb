"""python -m bench --corpus [--preset S,M] [--only NAME,..] [--repeats N] [--timeout SEC] [--no-numba] [--out FILE.md]

Runs every kernel of bench/corpus (NPBench-style numpy programs) with numpy,
shapejit (`jit(fn)`, default options) and numba (`numba.njit(fn)`, when it
accepts the function), and reports per kernel and preset: whether shapejit's
results (return value and mutated arguments) equal numpy's, whether it was
fully compiled (no eager node, graph break, fallback or eager call), its compile count
(one jitted function per kernel across the presets), first-call times and
steady-state speedups over numpy (medians; the implementations' steady calls
in turns, so the machine's drift, and one implementation's threads going to
sleep, fall on all alike).

Each kernel runs in a fresh process with a fresh compile cache (so compile
counts and first calls are cold and a crash or hang costs one kernel, not the
run) holding only what shapejit keeps per machine (this CPU's calibrated
product dispatch for float32 and float64, the GEMM and pool libraries:
``harness.keep_machine_artifacts``), as on a machine that has run shapejit
before — not one calibrating in the background while it is timed; the
markdown report is printed and written to --out (default
bench/results/corpus.md).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import types
import warnings
from pathlib import Path

import numpy as np

from bench import harness
from bench.report import cpu_description

RESULTS = Path(__file__).resolve().parent / "results"
REPEATS = 9  # steady calls per implementation and cell (rounds of turns)
# Seconds of untimed rounds before the timed ones.  OpenBLAS's own threads wait
# busily for ~0.1 s after a threaded product; once shapejit's pool has taken
# numpy's BLAS (runtime/threadpool.py) they sleep for good, but the first
# jitted calls after numpy's reference calls shared the cores with them: on a
# 2-core AMD EPYC znver3 (no AVX-512) doitgen S ran 3.0-5.6 ms a call for its
# first ~25 calls and 1.6 ms after (numpy: 1.6 ms).
WARM = 0.2
SETTLE = 0.2  # seconds idle before numba's calls: shapejit's workers wait ~80 ms for a job, then sleep
ROW = "@@corpus-row "   # marks the worker's result lines on its stdout


# ----------------------------------------------------------------- worker

def _numba_version(fn):
    """numba.njit(fn), with the module's other functions (helpers it calls)
    njit-compiled too, as a numba user would decorate them."""
    import numba
    g = dict(fn.__globals__)
    for name, v in fn.__globals__.items():
        if isinstance(v, types.FunctionType) and v.__module__ == fn.__module__ and v is not fn:
            g[name] = numba.njit(types.FunctionType(v.__code__, g, v.__name__, v.__defaults__, v.__closure__))
    return numba.njit(types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__))


def _steady(calls: dict, base, copy, repeats, budget, checks=None) -> dict:
    """Median seconds of each `calls[name](args)`, timed in turns: every round
    runs each implementation once, in a new order, so the machine's drift
    (and another implementation's threads going to sleep) falls on all
    alike; after WARM seconds of untimed rounds, up to `repeats` rounds
    (fewer once each has spent `budget` seconds on average, at least one),
    the arguments copied from `base` before each call when `copy` (outside
    the timed region).  `checks[name]` sees (args, result) of its first and
    last call; a call that raises drops that implementation (its exception
    in the result instead)."""
    from bench.corpus import fresh
    times = {name: [] for name in calls}
    order, names, spent = random.Random(0), list(calls), 0.0
    end = time.perf_counter() + WARM
    while time.perf_counter() < end:  # untimed rounds (see WARM)
        for name in names:
            try:
                calls[name](fresh(base) if copy else base)
            except Exception:  # noqa: BLE001 - the timed call reports it
                pass
    for r in range(repeats):
        order.shuffle(names)
        last = r == repeats - 1
        for name in names:
            if not isinstance(times[name], list):
                continue
            args = fresh(base) if copy else base
            try:
                t0 = time.perf_counter()
                out = calls[name](args)
                dt = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001 - reported by the caller
                times[name] = e
                continue
            times[name].append(dt)
            spent += dt
            if checks and name in checks and (r == 0 or last or spent > budget * len(calls)):
                checks[name](args, out)
        if spent > budget * len(calls):
            break
    return {name: statistics.median(t) if isinstance(t, list) else t for name, t in times.items()}


def _short_exc(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = next((f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno}"
                  for f in reversed(tb)), "?")
    return f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''} (at {where})"


def _numba_reason(e: BaseException) -> str:
    """The informative lines of a numba error (its first line is a generic
    "Failed in nopython mode pipeline")."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", x).strip() for x in str(e).splitlines()]
    lines = [x for x in lines if x and not x.startswith(("Failed in nopython", "- Resolution failure", "During:"))]
    if not lines:
        return _short_exc(e)
    text = lines[0] + (" " + lines[1] if len(lines) > 1 and lines[1].startswith(">>>") else "")
    text = re.sub(r" at 0x[0-9a-f]+", "", text)
    return f"{type(e).__name__}: {text[:200]}"


def _why_not(jf) -> str:
    """The reasons a jitted function is not fully compiled: its first fallback
    (location dropped), or the distinct numpy functions of its eager nodes and
    its graph breaks."""
    for line in jf.log:
        if line.startswith("fallback:"):
            return re.sub(r" \(at [^)]*\)$", "", line[len("fallback: "):])
    eager, on = [], False
    for line in jf.explain().splitlines():
        if line.strip().startswith("eager nodes"):
            on = True
            continue
        if on:
            if not line.startswith("      "):
                on = False
                continue
            name = line.strip().split(" at ")[0]
            if name not in eager:
                eager.append(name)
    breaks = jf.stats().get("graph_breaks", 0)
    why = (["eager: " + ", ".join(eager)] if eager else []) + ([f"{breaks} graph breaks"] if breaks else [])
    return "; ".join(why)


def run_kernel(k, presets, repeats: int, budget: float, use_numba: bool, emit=print) -> list[dict]:
    """All measurements of one kernel (in this process); one row per preset."""
    from bench.corpus import compare, fresh
    from jit import jit
    from jit.errors import JitWarning

    jf = jit(k.fn)
    nf, numba_note = None, ""
    if use_numba:
        try:
            nf = _numba_version(k.fn)
        except Exception as e:  # noqa: BLE001 - numba missing or refusing: reported
            numba_note = f"rejected: {_short_exc(e)}"
    copy = bool(k.mutates)
    rows = []
    for preset in presets:
        row = {"kernel": k.name, "family": k.family, "preset": preset}
        base = k.make_inputs(preset, np.random.default_rng(42))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # first calls: numpy's (the reference outputs), shapejit's (trace +
            # compile), numba's (its compile); then the steady calls of all, in turns
            args = fresh(base)
            t0 = time.perf_counter()
            res = k.fn(*args)
            row["numpy_first"] = time.perf_counter() - t0
            want = k.outputs(args, res)
            steady = {"numpy": lambda a: k.fn(*a)}
            numba_call = None
            problems = []

            def check(args, out, what):
                why = compare(k.outputs(args, out), want, rtol=k.rtol_for(preset))
                if why:
                    problems.append(f"{what}: {why}")
                for i, (a, b) in enumerate(zip(args, base)):
                    if i not in k.mutates and isinstance(b, np.ndarray) and a is not b and \
                            compare(a, b) is not None:
                        problems.append(f"{what}: wrote into input {i}")

            s0 = jf.stats()
            try:
                args = fresh(base)
                t0 = time.perf_counter()
                out = jf(*args)
                row["jit_first"] = time.perf_counter() - t0
                check(args, out, "first call")
                steady["jit"] = lambda a: jf(*a)
            except Exception as e:  # noqa: BLE001 - a shapejit failure is a result
                row["jit_error"] = _short_exc(e)

            if nf is not None:
                try:
                    args = fresh(base)
                    t0 = time.perf_counter()
                    out = nf(*args)
                    row["numba_first"] = time.perf_counter() - t0
                    why = compare(k.outputs(args, out), want, rtol=k.rtol_for(preset))
                    if why:
                        row["numba_status"] = f"wrong: {why}"
                    else:
                        numba_call = lambda a: nf(*a)  # noqa: E731
                        row["numba_status"] = "ok"
                except Exception as e:  # noqa: BLE001
                    row["numba_status"] = f"rejected: {_numba_reason(e)}"
                    if "numba_first" not in row:
                        nf = None   # not again for the next preset
                        numba_note = row["numba_status"]
            else:
                row["numba_status"] = numba_note or ("not run" if not use_numba else "rejected")

            # numpy and shapejit in turns (numpy's BLAS runs on shapejit's pool);
            # numba after them, alone (its products run on scipy's OpenBLAS, whose
            # own threads would wait busily beside the others' calls), once
            # shapejit's workers have gone to sleep
            medians = _steady(steady, base, copy, repeats, budget,
                              checks={"jit": lambda a, o: check(a, o, "later call")})
            if numba_call is not None:
                time.sleep(SETTLE)
                medians.update(_steady({"numba": numba_call}, base, copy, repeats, budget))
            for name, m in medians.items():
                if not isinstance(m, Exception):
                    row[name] = m
                elif name == "jit":
                    row["jit_error"] = _short_exc(m)
                elif name == "numba":
                    row["numba_status"] = f"rejected: {_numba_reason(m)}"
                else:
                    raise m
            s = jf.stats()
            row["equal"] = "jit_error" not in row and not problems
            row["mismatch"] = problems[0] if problems else ""
            row["compiles"] = s["compiles"]
            row["traces"] = s["traces"]
            row["graph_breaks"] = s.get("graph_breaks", 0)
            row["stats_delta"] = {x: s[x] - s0[x] for x in ("eager_nodes", "fallbacks", "eager_calls")}
            row["fully"] = "jit_error" not in row and \
                s["eager_nodes"] == 0 and s["fallbacks"] == 0 and s["eager_calls"] == 0 and s["graph_breaks"] == 0
            row["why_not"] = "" if row["fully"] else _why_not(jf)
            row["jit_warnings"] = sum(issubclass(w.category, JitWarning) for w in caught)
        rows.append(row)
        emit(ROW + json.dumps(row))
    return rows


def worker(argv) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--preset", default="S")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--no-numba", action="store_true")
    a = ap.parse_args(argv)
    from bench.corpus import BY_NAME
    run_kernel(BY_NAME[a.worker], a.preset.split(","), a.repeats, a.budget, not a.no_numba,
               emit=lambda line: print(line, flush=True))


# ----------------------------------------------------------------- driver

def parse_args(argv):
    from bench.corpus import BY_NAME
    ap = argparse.ArgumentParser(prog="python -m bench --corpus", description=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="S,M", help="comma-separated presets: T, S, M (default S,M)")
    ap.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    ap.add_argument("--repeats", type=int, default=REPEATS,
                    help=f"steady calls per cell, the implementations in turns (fewer once --budget seconds "
                         f"are spent; default {REPEATS})")
    ap.add_argument("--budget", type=float, default=1.0, help="seconds of steady calls per cell (default 1)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per kernel process (default 600)")
    ap.add_argument("--no-numba", action="store_true", help="skip numba")
    ap.add_argument("--out", default=str(RESULTS / "corpus.md"), help="markdown file to write")
    a = ap.parse_args(argv)
    a.presets = [p.strip() for p in a.preset.split(",") if p.strip()]
    bad = [p for p in a.presets if p not in ("T", "S", "M")]
    if bad:
        ap.error(f"unknown preset(s) {bad}; choose from T, S, M")
    a.kernels = [n.strip() for n in a.only.split(",") if n.strip()] or list(BY_NAME)
    bad = [n for n in a.kernels if n not in BY_NAME]
    if bad:
        ap.error(f"unknown kernel(s) {bad}; choose from {', '.join(BY_NAME)}")
    return a


def _run_worker(name, a, log) -> list[dict]:
    cmd = [sys.executable, "-m", "bench.corpus_run", "--worker", name, "--preset", ",".join(a.presets),
           "--repeats", str(a.repeats), "--budget", str(a.budget)] + (["--no-numba"] if a.no_numba else [])
    with tempfile.TemporaryDirectory(prefix="shapejit-corpus-cache-") as cache:
        harness.seed_machine_artifacts(cache)
        env = dict(os.environ, SHAPEJIT_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        status = ""
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env, cwd=root)
            out, err = p.stdout, p.stderr
            if p.returncode != 0:
                status = f"process failed (exit {p.returncode}): " + (err.strip().splitlines() or [""])[-1][:200]
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            status = f"timeout after {a.timeout:.0f} s"
    rows = [json.loads(line[len(ROW):]) for line in out.splitlines() if line.startswith(ROW)]
    done = {r["preset"] for r in rows}
    for preset in a.presets:
        if preset not in done:
            rows.append({"kernel": name, "preset": preset, "failed": status or "no result", "equal": False,
                         "fully": False, "numba_status": "not run"})
            log(f"  {name} {preset}: {status or 'no result'}")
    return rows


def main(argv=None) -> None:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    t_start = time.perf_counter()

    def log(msg):
        print("[%5.0fs] %s" % (time.perf_counter() - t_start, msg), file=sys.stderr, flush=True)

    harness.keep_machine_artifacts(calibrate=("float32", "float64"))  # (no kernel's process calibrates)
    rows = []
    for name in a.kernels:
        got = _run_worker(name, a, log)
        for r in got:
            if "failed" not in r:
                log(f"{name:26s} {r['preset']}  equal={'yes' if r['equal'] else 'NO'}  "
                    f"fully={'yes' if r['fully'] else 'no'}  compiles={r.get('compiles')}  "
                    f"jit x{_ratio(r, 'jit')}  numba {_numba_cell(r)}")
        rows += got
    md = render(rows, a, time.perf_counter() - t_start)
    print(md)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    log(f"wrote {out}")


# ----------------------------------------------------------------- report

def _ratio(r, impl) -> str:
    if r.get(impl) is None or r.get("numpy") is None:
        return "-"
    return f"{r['numpy'] / r[impl]:.2f}"


def _numba_cell(r) -> str:
    st = r.get("numba_status", "")
    if st == "ok":
        return f"{r['numpy'] / r['numba']:.2f}x"
    return st.split(":")[0] if st else "-"


def _ms(x) -> str:
    if x is None:
        return "-"
    return f"{x * 1e3:.3g}" if x < 10 else f"{x * 1e3:.0f}"


def _s(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _geomean(xs) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def summarize(rows, presets) -> list[str]:
    by_kernel: dict[str, list] = {}
    for r in rows:
        by_kernel.setdefault(r["kernel"], []).append(r)
    n_k = len(by_kernel)
    cells = len(rows)
    ran = [r for r in rows if "failed" not in r]
    unfinished = ", ".join(f"{r['kernel']} {r['preset']} ({r['failed']})" for r in rows if "failed" in r)
    equal = sum(bool(r.get("equal")) for r in ran)
    good = [k for k, rs in by_kernel.items()
            if all(r.get("fully") for r in rs) and max((r.get("compiles") or 0) for r in rs) <= 2]
    timed = [r for r in rows if r.get("jit") and r.get("numpy")]
    both = [r for r in timed if r.get("numba")]
    g_all = _geomean([r["numpy"] / r["jit"] for r in timed])
    g_jit = _geomean([r["numpy"] / r["jit"] for r in both])
    g_nb = _geomean([r["numpy"] / r["numba"] for r in both])
    fmt = lambda g: "-" if g is None else f"{g:.2f}x"  # noqa: E731
    lines = [
        f"- kernels: {n_k}, presets {','.join(presets)}: {cells} cells",
        f"- equal to numpy: {equal}/{len(ran)} cells that ran ({100 * equal / max(len(ran), 1):.0f}%); "
        f"did not finish: {unfinished or 'none'}",
        f"- fully compiled with <= 2 compiles (every preset): {len(good)}/{n_k} kernels "
        f"({100 * len(good) / max(n_k, 1):.0f}%): {', '.join(good) or '-'}",
        f"- geometric-mean speedup over numpy, shapejit, all timed cells ({len(timed)}): {fmt(g_all)}",
        f"- over the cells numba accepts ({len(both)}): shapejit {fmt(g_jit)}, numba {fmt(g_nb)}",
        f"- first calls in all: shapejit {sum(r.get('jit_first', 0) for r in ran):.0f} s over {len(ran)} cells; "
        f"over the cells numba accepts, shapejit {sum(r['jit_first'] for r in both):.0f} s, "
        f"numba {sum(r.get('numba_first', 0) for r in both):.0f} s",
    ]
    wrong = [r for r in ran if not r.get("equal")]
    if wrong:
        lines.append("- not equal to numpy: " + "; ".join(
            f"{r['kernel']} {r['preset']}: {r.get('jit_error') or r.get('mismatch')}"
            for r in wrong))
    reasons: dict[str, list] = {}
    for r in rows:
        why = r.get("why_not") or ""
        if not r.get("fully") and why and "failed" not in r:
            key = re.sub(r"\b[su]\d+\b", "s", why)[:110]
            reasons.setdefault(key, [])
            if r["kernel"] not in reasons[key]:
                reasons[key].append(r["kernel"])
    if reasons:
        lines.append("- why not fully compiled (kernels per reason):")
        for why, ks in sorted(reasons.items(), key=lambda x: -len(x[1])):
            lines.append(f"  - {len(ks)}: {why} — {', '.join(ks)}")
    warned = sum(r.get("jit_warnings", 0) for r in rows)
    lines.append(f"- JitWarnings caught: {warned}")
    return lines


def render(rows, a, seconds) -> str:
    try:
        import numba
        nb = numba.__version__
    except Exception:  # noqa: BLE001
        nb = "n/a"
    try:
        root = Path(__file__).resolve().parent.parent
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=root).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=root).stdout.strip()
        commit = f"shapejit {commit}{' + uncommitted changes' if dirty else ''}, " if commit else ""
    except OSError:
        commit = ""
    head = [
        "# shapejit on the NPBench-style corpus",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {commit}{cpu_description()}, {os.cpu_count()} cores, "
        f"numpy {np.__version__}, "
        f"numba {nb}; presets {','.join(a.presets)}, up to {a.repeats} steady calls per cell "
        f"and implementation, in turns (budget {a.budget:g} s), {seconds:.0f} s in all.",
        "",
        "Speedups are numpy's median time over the implementation's (higher is faster); first calls "
        "include tracing and compiling (shapejit, cold compile cache) or numba's compile. `equal`: the "
        "return value and every mutated argument of the first and later shapejit calls equal numpy's "
        "(float32 rtol 1e-5, float64 rtol 1e-9, wider where a kernel says so (nbody: chaotic, values not compared at M), "
        "atol rtol·max(1, max|ref|); ints exact). `fully`: "
        "no eager node, graph break, fallback or eager call (cumulative over the presets); `compiles`: cumulative "
        "for one jitted function across the presets; `breaks`: its graph breaks (data-dependent "
        "decisions its entries are specialized on).",
        "",
        "## Summary",
        "",
        *summarize(rows, a.presets),
        "",
        "## Kernels",
        "",
        "| kernel | preset | equal | fully | compiles | breaks | numpy ms | shapejit x | numba x | "
        "1st call shapejit s | 1st call numba s | why not fully compiled |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    body = []
    for r in rows:
        if "failed" in r:
            body.append(f"| {r['kernel']} | {r['preset']} | FAILED | - | - | - | - | - | - | - | - | {r['failed']} |")
            continue
        eq = "yes" if r["equal"] else ("ERROR" if r.get("jit_error") else "WRONG")
        why = r.get("jit_error") or r.get("mismatch") or r.get("why_not") or ""
        body.append(
            f"| {r['kernel']} | {r['preset']} | {eq} | {'yes' if r['fully'] else 'no'} | {r.get('compiles', '-')} "
            f"| {r.get('graph_breaks', '-')} "
            f"| {_ms(r.get('numpy'))} | {_ratio(r, 'jit')} | {_numba_cell(r)} | {_s(r.get('jit_first'))} "
            f"| {_s(r.get('numba_first'))} | {why.replace('|', '/')[:120]} |")
    notes = sorted({f"{r['kernel']}: {r['numba_status']}" for r in rows
                    if r.get("numba_status", "").startswith(("rejected", "wrong"))})
    tail = ["", "## numba", "", *[f"- {n[:220]}" for n in notes]] if notes else []
    return "\n".join(head + body + tail) + "\n"


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        worker(sys.argv[1:])
    else:
        main()

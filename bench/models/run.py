"""``python -m bench --models``: whole models, numpy eager vs shapejit (vs torch eager).

GPT-2 (124M width, 2 layers, vocab 8192) over a sweep of sequence lengths and
a stream of 20 random lengths; Llama (dim 768, 12 heads, 4 KV heads, 2
layers) prefill at a few lengths and a 16-step decode loop.  Each timed cell
is the median over rounds in which each implementation takes a turn, in a
new order every round (``harness.turns``; the stream's passes, seconds each,
one implementation after the other), after the output was checked against
numpy (``suite.check``).  "first" is the first call at that size (it traces and
compiles when the size is new to shapejit).  The last section lists what shapejit did with each model:
``stats()`` and the reasons ``explain()`` gives (``bench.models.facts``).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .. import harness, report
from ..suite import SETTLE_S, check
from . import facts, format_facts
from . import gpt2 as G
from . import llama as L

SWEEP, QUICK_SWEEP = [1, 8, 32, 64, 128, 256, 384, 512], [1, 32, 128, 512]
STREAM_CALLS, MAX_LEN = 20, 512
PREFILL, QUICK_PREFILL = [16, 128, 512], [16, 128]
PROMPT, DECODE_STEPS = 32, 16
ROUNDS, QUICK_ROUNDS = 7, 3  # turns of each implementation per cell
WARM, TURN = 0.1, 0.2  # seconds of untimed, then timed, calls in a turn


def _torch():
    try:
        import torch
        torch.set_num_threads(os.cpu_count())
        from . import torch_ref
        return torch, torch_ref
    except Exception as e:  # ImportError, or a broken install
        return None, "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def _revision() -> str:
    """The git commit of the compiler measured, '+dirty' when its sources have uncommitted edits."""
    import subprocess
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "jit", "shapes", "clustering",
                                "codegen", "runtime"], cwd=root, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "(not a git checkout)"
    return rev + ("+dirty" if dirty.strip() else "")


def _fresh_cache(tmp: Path, name: str) -> None:
    """A compile cache of its own: a later JitFunction of the same code starts cold."""
    from runtime.cache import reset_default_cache
    os.environ["SHAPEJIT_CACHE_DIR"] = str(tmp / name)
    reset_default_cache()


class Rows:
    def __init__(self):
        self.rows, self.notes = [], report.Notes()

    def add(self, model, case, times, first=None, counts="", wrong=None, scale=1):
        """times: {"numpy": Timing, "shapejit": Timing, "torch": Timing|None}, per `scale` steps."""
        base = times["numpy"].median / scale

        def cell(name):
            t = times.get(name)
            if wrong and wrong.get(name):
                return "**WRONG** " + self.notes.add("%s %s %s: %s" % (model, case, name, wrong[name]))
            if t is None:
                return "n/a"
            s = t.median / scale
            mark = ("!" if t.foreign_load > harness.BUSY else "") + ("~" if t.spread > 0.25 else "")
            return mark + report.fmt_time(s) + ("" if name == "numpy" else " (%s)" % report.fmt_ratio(base / s))
        self.rows.append([model, case, cell("numpy"), cell("shapejit"), cell("torch"),
                          report.fmt_time(first) if first is not None else "", counts])


def _time(calls: dict, budget) -> dict:
    """{name: Timing}: the implementations' calls in turns (``harness.turns``:
    every round each one's turn, in a new order, SETTLE_S idle before each:
    the previous one's thread pool stops spinning), so the machine's drift
    falls on all alike; a Timing's samples are its turns' medians."""
    rounds = QUICK_ROUNDS if budget.target < 0.2 else ROUNDS
    samples = harness.turns(list(calls.values()), rounds, warm=WARM, turn=TURN, settle=SETTLE_S)
    return {name: harness.Timing(statistics.median(x), x, len(x)) for name, x in zip(calls, samples)}


def _one_after_another(calls: dict, budget) -> dict:
    """{name: Timing}: each implementation measured on its own (a stream's
    pass takes seconds: too long for turns), SETTLE_S after the previous one."""
    out = {}
    for name, call in calls.items():
        time.sleep(SETTLE_S)
        out[name] = harness.measure(call, budget)
    return out


def _counts(jf, before=None):
    st = jf.stats()
    keys = ("traces", "compiles", "fallbacks", "eager_calls")
    if before is not None:
        return "/".join(str(st[k] - before[k]) for k in keys), st
    return "/".join(str(st[k]) for k in keys), st


def run_gpt2(rows, budget, sweep, tmp, log, torch_mod):
    from jit import jit
    cfg = G.BENCH
    P = G.init_params(**cfg)
    H = cfg["n_head"]
    torch, tref = torch_mod
    PT = tref.to_torch(P) if torch else None
    _fresh_cache(tmp, "gpt2-sweep")
    jf = jit(G.gpt2)
    before = jf.stats()
    for T in sweep:
        ids = G.token_ids(T, cfg["n_vocab"], seed=T)
        ref = G.gpt2(ids, P, H)
        first, out = harness.time_once(lambda: jf(ids, P, H))
        wrong = {"shapejit": check(out, ref)}
        calls = {"numpy": lambda: G.gpt2(ids, P, H), "shapejit": lambda: jf(ids, P, H)}
        if torch:
            tid = torch.from_numpy(ids)
            wrong["torch"] = check(tref.gpt2(tid, PT, H).numpy(), ref)
            calls["torch"] = lambda: tref.gpt2(tid, PT, H)
        times = _time(calls, budget)
        counts, before = _counts(jf, before)
        rows.add("gpt2", "T=%d" % T, times, first, counts, wrong)
        log("gpt2 T=%d: numpy %s, shapejit %s" % (T, report.fmt_time(times["numpy"].median),
                                                 report.fmt_time(times["shapejit"].median)))
    sweep_facts = facts(jf)

    # a stream of random lengths: a new JitFunction on a cold cache, then the same stream again
    lengths = np.random.default_rng(7).integers(1, MAX_LEN + 1, STREAM_CALLS)
    streams = [G.token_ids(int(T), cfg["n_vocab"], seed=int(T) + 1000) for T in lengths]
    refs = [G.gpt2(ids, P, H) for ids in streams]
    _fresh_cache(tmp, "gpt2-stream")
    js = jit(G.gpt2)
    t0 = time.perf_counter()
    outs = [js(ids, P, H) for ids in streams]
    cold = time.perf_counter() - t0
    bad = [c for c in (check(o, r) for o, r in zip(outs, refs)) if c]
    calls = {"numpy": lambda: [G.gpt2(ids, P, H) for ids in streams],
             "shapejit": lambda: [js(ids, P, H) for ids in streams]}
    if torch:
        tids = [torch.from_numpy(ids) for ids in streams]
        calls["torch"] = lambda: [tref.gpt2(t, PT, H) for t in tids]
    n = 1 if budget.target < 0.2 else 3   # a pass takes seconds: one timed pass (quick) or three
    stream_budget = dataclasses.replace(budget, warmup=0, min_repeats=n, max_repeats=n, retries=0)
    times = _one_after_another(calls, stream_budget)
    counts, _ = _counts(js)
    rows.add("gpt2", "stream of %d lengths in 1..%d (per call)" % (STREAM_CALLS, MAX_LEN), times,
             cold / STREAM_CALLS, counts, {"shapejit": bad[0] if bad else None}, scale=STREAM_CALLS)
    log("gpt2 stream: first pass %.2f s" % cold)
    return {"gpt2 (length sweep)": sweep_facts, "gpt2 (stream, cold cache)": facts(js)}


def run_llama(rows, budget, prefill, tmp, log, torch_mod):
    cfg = L.BENCH
    P = L.init_params(**cfg)
    torch, tref = torch_mod
    _fresh_cache(tmp, "llama")
    m_np, m_jit = L.Llama(P, cfg), L.Llama(P, cfg, jit_options={})
    m_t = tref.Llama(P, cfg) if torch else None
    jf = m_jit.forward
    before = jf.stats()
    rng = np.random.default_rng(3)
    for T in prefill:
        ids = rng.integers(0, cfg["vocab"], (1, T))
        ref = m_np.prefill(ids)
        first, out = harness.time_once(lambda: m_jit.prefill(ids))
        wrong = {"shapejit": check(out, ref)}
        calls = {"numpy": lambda: m_np.prefill(ids), "shapejit": lambda: m_jit.prefill(ids)}
        if torch:
            wrong["torch"] = check(m_t.prefill(ids).numpy(), ref)
            calls["torch"] = lambda: m_t.prefill(ids)
        times = _time(calls, budget)
        counts, before = _counts(jf, before)
        rows.add("llama", "prefill T=%d" % T, times, first, counts, wrong)
        log("llama prefill T=%d: numpy %s, shapejit %s" % (T, report.fmt_time(times["numpy"].median),
                                                          report.fmt_time(times["shapejit"].median)))

    # decode: prefill a prompt, then DECODE_STEPS steps of one (fixed) token each
    prompt = rng.integers(0, cfg["vocab"], (1, PROMPT))
    tokens = rng.integers(0, cfg["vocab"], DECODE_STEPS)
    models = {"numpy": m_np, "shapejit": m_jit}
    if torch:
        models["torch"] = m_t
    for m in models.values():
        m.prefill(prompt)

    def loop(m):
        return lambda: [m.decode_step(tokens[s], PROMPT + s) for s in range(DECODE_STEPS)]
    ref = loop(m_np)()
    first, out = harness.time_once(loop(m_jit))
    bad = [c for c in (check(o, r) for o, r in zip(out, ref)) if c]
    wrong = {"shapejit": bad[0] if bad else None}
    if torch:
        bad = [c for c in (check(o.numpy(), r) for o, r in zip(loop(m_t)(), ref)) if c]
        wrong["torch"] = bad[0] if bad else None
    calls = {k: loop(m) for k, m in models.items()}
    times = _time(calls, budget)
    counts, _ = _counts(jf, before)
    rows.add("llama", "decode %d steps after a %d-token prompt (per step)" % (DECODE_STEPS, PROMPT),
             times, first / DECODE_STEPS, counts, wrong, scale=DECODE_STEPS)
    log("llama decode: numpy %s/step" % report.fmt_time(times["numpy"].median / DECODE_STEPS))
    return {"llama (prefill sweep + decode loop)": facts(jf)}


def render(meta, rows, all_facts, torch_note):
    lines = [report.header(meta).replace("# shapejit benchmark", "# shapejit: whole models"), "",
             __doc__.split("\n\n")[1].replace("\n", " "), "",
             "Cells: median time (speedup = numpy time / this time); `~` noisy (IQR > 25%% of the "
             "median), `!` other processes kept more than %.1f cores busy. first = shapejit's first "
             "call at that size (stream: mean per call of the first pass over a cold cache; decode: "
             "per step of the first loop). counts = traces/compiles/fallbacks/eager_calls during that row."
             % harness.BUSY, "",
             report.table(["model", "case", "numpy", "shapejit", "torch", "shapejit first", "counts"],
                          rows.rows)]
    if rows.notes.items:
        lines += [""] + ["%d. %s" % (i + 1, t) for i, t in enumerate(rows.notes.items)]
    if torch_note:
        lines += ["", "torch unavailable: " + torch_note]
    lines += ["", "## What shapejit did with each model", "",
              "stats() after the rows above, and explain()'s reasons (deduplicated, with counts).", "",
              "```"]
    lines += [format_facts(name, f) + "\n" for name, f in all_facts.items()]
    lines += ["```", ""]
    return "\n".join(lines)


def main(quick: bool, out: Path, log=None) -> str:
    t_start = time.perf_counter()
    if log is None:
        def log(msg):
            print("[%5.0fs] %s" % (time.perf_counter() - t_start, msg), file=sys.stderr, flush=True)
    load = harness.LoadMeter().start()
    budget = harness.QUICK if quick else harness.Budget(target=0.3, min_repeats=5, max_repeats=50)
    torch_mod = _torch()
    torch_note = "" if torch_mod[0] else torch_mod[1]
    if torch_mod[0] is None:
        torch_mod = (None, None)
    rows, all_facts = Rows(), {}
    with tempfile.TemporaryDirectory(prefix="shapejit-models-") as tmp:
        all_facts.update(run_gpt2(rows, budget, QUICK_SWEEP if quick else SWEEP, Path(tmp), log, torch_mod))
        all_facts.update(run_llama(rows, budget, QUICK_PREFILL if quick else PREFILL, Path(tmp), log, torch_mod))
    versions = {"shapejit": _revision()}
    if torch_mod[0]:
        versions["torch"] = torch_mod[0].__version__
    meta = report.machine_meta("quick" if quick else "full", time.perf_counter() - t_start, versions, load.stop())
    md = render(meta, rows, all_facts, torch_note)
    print(md)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    log("wrote %s" % out)
    return md

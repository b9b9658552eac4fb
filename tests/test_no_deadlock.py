"""No deadlock between calls, compiles, cache clears, metric scrapes and
fork (issue 10): threads call jitted functions with random shapes (checked
against numpy), a thread compiles new functions, one clears the compile
cache, one scrapes the metrics and reads explain(), and one forks children
that call, compile and scrape in turn.  The storm runs in a child process
with a time limit: a hang fails the test, it does not stop the suite.
Bounded in CI (10 s); SHAPEJIT_STRESS=full runs it for 5 minutes."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

STORM = textwrap.dedent("""
    import faulthandler, json, os, signal, sys, threading, time, warnings
    import numpy as np
    from prometheus_client import CollectorRegistry, generate_latest
    from jit import jit
    from runtime import metrics
    from runtime.cache import default_cache

    warnings.simplefilter("ignore")
    DURATION = float(sys.argv[1])
    CHILD_LIMIT = 40.0  # seconds a forked child may take
    registry = metrics.register(CollectorRegistry())

    def f(x):
        return np.tanh(x * 1.5 + 0.25).sum(axis=-1) / x.shape[-1]

    def g(x, w):
        return np.maximum(x @ w + 1.0, 0.0)

    def h(x):
        y = x.copy()
        y[:, 1:] += 0.5 * x[:, :-1]
        return y.cumsum(axis=0)

    F, G, H = jit(f), jit(g), jit(h)
    W = np.random.default_rng(0).standard_normal((24, 40)).astype(np.float32)
    counts = {"calls": 0, "compiles": 0, "clears": 0, "scrapes": 0, "forks": 0, "children_ok": 0}
    errors = []
    lock = threading.Lock()
    stop = threading.Event()

    def note(key, n=1):
        with lock:
            counts[key] += n

    def check(a, b, what):
        if a.shape != b.shape or a.dtype != b.dtype or not np.allclose(a, b, rtol=2e-5, atol=2e-5):
            raise AssertionError(f"{what}: wrong result")

    def one_call(rng):
        rows, cols = int(rng.integers(1, 300)), int(rng.integers(2, 64))
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        which = int(rng.integers(3))
        if which == 0:
            check(F(x), f(x), "f")
        elif which == 1:
            x = x[:, :1].repeat(24, axis=1) if cols < 24 else np.ascontiguousarray(x[:, :24])
            check(G(x, W), g(x, W), "g")
        else:
            check(H(x), h(x), "h")

    def fresh_function(k):
        def p(x):
            return np.sin(x) * k + x.mean()
        return jit(p), p

    def caller(seed):
        rng = np.random.default_rng(seed)
        while not stop.is_set():
            one_call(rng)
            note("calls")

    def compiler():
        k = 0
        while not stop.is_set():
            k += 1
            jp, p = fresh_function(float(k))
            x = np.linspace(-1.0, 1.0, 7 + k % 50, dtype=np.float64)
            check(jp(x), p(x), "fresh")
            note("compiles")

    def clearer():
        while not stop.wait(0.4):
            default_cache().clear()
            note("clears")

    def scraper():
        while not stop.wait(0.05):
            text = generate_latest(registry).decode()
            if "shapejit_calls_total" not in text:
                raise AssertionError("a scrape without shapejit's metrics")
            F.stats(); G.explain()
            note("scrapes")

    def child() -> int:
        # in the forked child: every kind of work once more, then exit
        rng = np.random.default_rng(os.getpid())
        for _ in range(5):
            one_call(rng)
        jp, p = fresh_function(-1.5)
        x = np.arange(11.0)
        check(jp(x), p(x), "child compile")
        default_cache().clear()
        generate_latest(registry)
        return 0

    def forker():
        while not stop.wait(0.3):
            pid = os.fork()
            if pid == 0:
                faulthandler.dump_traceback_later(CHILD_LIMIT - 10)  # where it hangs, if it does
                code = 3
                try:
                    code = child()
                except BaseException as e:  # noqa: BLE001
                    print(f"child: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
                os._exit(code)
            note("forks")
            deadline = time.monotonic() + CHILD_LIMIT
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    if os.waitstatus_to_exitcode(status) != 0:
                        raise AssertionError(f"child exited with {os.waitstatus_to_exitcode(status)}")
                    note("children_ok")
                    break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    raise AssertionError(f"a forked child hung for {CHILD_LIMIT:.0f} s")
                time.sleep(0.01)

    def guarded(fn, *args):
        def run():
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001
                with lock:
                    errors.append(f"{fn.__name__}: {type(e).__name__}: {e}")
                stop.set()
        return threading.Thread(target=run, name=fn.__name__, daemon=True)

    threads = [guarded(caller, s) for s in range(4)] + [guarded(t) for t in (compiler, clearer, scraper, forker)]
    for t in threads:
        t.start()
    stop.wait(DURATION)
    stop.set()
    hung = []
    for t in threads:
        t.join(CHILD_LIMIT + 30)
        if t.is_alive():
            hung.append(t.name)
    print(json.dumps({"counts": counts, "errors": errors, "hung": hung}), flush=True)
    os._exit(0)
""")


def _storm(tmp_path, seconds: float) -> dict:
    script = tmp_path / "storm.py"
    script.write_text(STORM)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHAPEJIT_")}
    env["SHAPEJIT_CALIBRATE"] = "0"  # (no background calibration: conftest.py)
    env.update(SHAPEJIT_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, str(script), str(seconds)], env=env, capture_output=True, text=True,
                         timeout=seconds + 240)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.stress
def test_calls_compiles_clears_scrapes_and_forks_never_deadlock(tmp_path):
    seconds = 300.0 if os.environ.get("SHAPEJIT_STRESS") == "full" else 10.0
    report = _storm(tmp_path, seconds)
    assert report["errors"] == [] and report["hung"] == [], report
    c = report["counts"]
    assert c["calls"] > 100 and c["compiles"] >= 3 and c["clears"] >= 5 and c["scrapes"] >= 20, c
    assert c["forks"] >= 3 and c["children_ok"] == c["forks"], c

"""The persistent compile cache: across processes, corrupt entries, races,
unwritable directories, eviction, and the `python -m jit cache` command."""
import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np

from jit import jit
from runtime.cache import ArtifactCache, CacheWarning, reset_default_cache
from tests.conftest import assert_like_numpy, metric

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    from jit import jit

    def layer(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        y = (x - m) / np.sqrt(v + 1e-5) * g + b
        return 0.5 * y * (1.0 + np.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))

    rows = int(sys.argv[1])
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 96)).astype(np.float32)
    g, b = np.ones(96, np.float32), np.zeros(96, np.float32)
    f = jit(layer)
    y = f(x, g, b)
    y = f(x, g, b)
    ok = bool(np.allclose(y, layer(x, g, b), rtol=1e-5, atol=1e-5))
    print(json.dumps(dict(f.stats(), ok=ok, log=f.log, saving=f._saving)))
""")


def run_script(tmp_path, rows, cache_dir, extra_env=None):
    script = tmp_path / "layer_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT)
    env.update(extra_env or {})
    out = subprocess.run([sys.executable, str(script), str(rows)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_hits_disk_for_a_new_shape(tmp_path):
    cache = tmp_path / "c"
    first = run_script(tmp_path, 37, cache)
    assert first["ok"] and first["compiles"] == 1 and first["cache_hits_disk"] == 0
    second = run_script(tmp_path, 1234, cache)  # a shape the first never saw
    assert second["ok"]
    assert second["compiles"] == 0, (first, second)  # (what each process logged: why the second compiled)
    assert second["cache_hits_disk"] >= 1


def test_corrupt_entries_are_dropped_and_recompiled(tmp_path):
    cache_dir = tmp_path / "c"
    assert run_script(tmp_path, 20, cache_dir)["compiles"] == 1
    c = ArtifactCache(str(cache_dir))
    keys = c._disk.keys()
    assert keys
    for k, key in enumerate(keys):
        blob = c._disk.get(key)
        bad = blob[: len(blob) // 2] if k % 2 == 0 else blob[:100] + bytes(b ^ 0x5A for b in blob[100:200]) + blob[200:]
        c._disk.set(key, bad)
    again = run_script(tmp_path, 33, cache_dir)
    assert again["ok"] and again["compiles"] == 1 and again["cache_hits_disk"] == 0
    third = run_script(tmp_path, 41, cache_dir)  # the recompiled entry replaced the bad one
    assert third["ok"] and third["compiles"] == 0 and third["cache_hits_disk"] == 1


def test_two_processes_compiling_the_same_key_at_once(tmp_path):
    script = tmp_path / "layer_script.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=str(tmp_path / "c"), PYTHONPATH=ROOT)
    procs = [subprocess.Popen([sys.executable, str(script), str(n)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in (17, 29, 45)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] for r in results)
    assert all(r["compiles"] + r["cache_hits_disk"] == 1 for r in results)


def test_unwritable_directory_degrades_to_memory_with_one_warning(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("SHAPEJIT_CACHE_DIR", str(blocker / "cache"))
    reset_default_cache()
    f = jit(lambda x: np.exp(x) + 1.0)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (3, 5):
            assert_like_numpy(f(np.arange(float(n))), np.exp(np.arange(float(n))) + 1.0)
        g = jit(lambda x: np.exp(x) - 1.0)
        g(np.ones(3))
    assert sum(issubclass(x.category, CacheWarning) for x in w) == 1
    assert f.stats()["compiles"] == 1


def test_cache_off(monkeypatch):
    monkeypatch.setenv("SHAPEJIT_CACHE", "0")
    reset_default_cache()
    from runtime.cache import default_cache
    assert not default_cache().on_disk
    f = jit(lambda x: x * 2.0)
    assert_like_numpy(f(np.ones(4)), np.ones(4) * 2.0)


def test_lru_eviction_bounds_the_size(tmp_path):
    c = ArtifactCache(str(tmp_path / "lru"), size_limit=200_000)
    for k in range(40):
        c.put(f"key{k}", os.urandom(20_000), "f", "sig")
    c._disk._cache.cull()
    assert c.volume() <= 400_000
    assert c._disk.get("key39") is not None  # the newest stays
    assert c._disk.get("key0") is None       # the oldest went first


def test_cache_command_lists_and_clears(tmp_path):
    cache_dir = tmp_path / "c"
    run_script(tmp_path, 12, cache_dir)
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=str(cache_dir), PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-m", "jit", "cache"], env=env, capture_output=True, text=True,
                         timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    kinds = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("layer")}
    assert kinds == {"artifact", "trace"}  # the function's object code and its saved trace
    libraries = [line for line in out.stdout.splitlines() if line.startswith("(library)")]
    assert all(line.split()[1] == "library" for line in libraries)  # e.g. the thread pool's spin-wait
    n = 2 + len(libraries)
    assert f"{n} entries (1 saved traces, {len(libraries)} library kernels)" in out.stdout
    out = subprocess.run([sys.executable, "-m", "jit", "cache", "--clear"], env=env, capture_output=True,
                         text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and f"cleared {n}" in out.stdout


def test_entry_hits_and_compile_cache_hits_are_counted_apart(tmp_path, monkeypatch):
    """A call a compiled entry serves is an entry hit; a call no entry serves
    is an entry miss, and loads from the compile cache (a cache hit by level
    and artifact) or compiles (a cache miss)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from jit import metrics
    monkeypatch.setenv("SHAPEJIT_CACHE_DIR", str(tmp_path / "c"))
    reset_default_cache()

    def softplus_counted(x):
        return np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0.0)

    f = jit(softplus_counted)
    for n in (5, 9, 9, 40):
        f(np.linspace(-3, 3, n))
    s = f.stats()
    assert (s["compiles"], s["cache_misses"], s["entry_hits"]) == (1, 1, 3), f.log
    assert s["cache_hits_memory"] + s["cache_hits_disk"] + s["cache_hits_remote"] == 0
    g = jit(softplus_counted)  # no entry of its own: it loads the trace f saved, with its object code
    assert_like_numpy(g(np.linspace(-3, 3, 7)), softplus_counted(np.linspace(-3, 3, 7)))
    t = g.stats()
    assert (t["traces"], t["compiles"], t["cache_misses"], t["entry_hits"], t["cache_hits_disk"]) == (0, 0, 0, 0, 1)
    monkeypatch.setenv("SHAPEJIT_TRACE_CACHE", "0")
    h = jit(softplus_counted)  # saved traces off: it traces, and finds the object code this process holds
    assert_like_numpy(h(np.linspace(-3, 3, 6)), softplus_counted(np.linspace(-3, 3, 6)))
    u = h.stats()
    assert (u["traces"], u["compiles"], u["cache_hits_memory"], u["cache_hits_disk"]) == (1, 0, 1, 0), h.log
    registry = CollectorRegistry()
    metrics.register(registry)
    text = generate_latest(registry).decode()
    name = f.metrics.name  # g and h share it: one series each, their sum
    assert metric(text, "shapejit_calls_total", function=name) == 6
    assert metric(text, "shapejit_entry_hits_total", function=name) == 3
    assert metric(text, "shapejit_entry_misses_total", function=name) == 3  # the first calls of f, g and h
    assert metric(text, "shapejit_cache_misses_total", function=name) == 1
    assert metric(text, "shapejit_cache_hits_total", function=name, level="disk", artifact="trace") == 1
    assert metric(text, "shapejit_cache_hits_total", function=name, level="memory", artifact="object") == 1
    assert metric(text, "shapejit_cache_hits_total", function=name, level="disk", artifact="object") == 0
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]
    assert len(series) == len(set(series))


def test_functions_that_share_a_name_sum_every_figure():
    from runtime.metrics import FunctionMetrics
    a, b = FunctionMetrics("same"), FunctionMetrics("same")
    for k, m in enumerate((a, b)):
        for attr, v in vars(m).items():
            if isinstance(v, int):
                setattr(m, attr, 10 * k + len(attr))
            elif isinstance(v, dict) and attr != "compile_seconds":
                for label in v:
                    v[label] = 7 + k
        m.latency.observe(1e-3 * (k + 1))
        m.compile_seconds["llvm"].observe(0.1)
    t = FunctionMetrics.total([a, b])
    for attr, v in vars(t).items():
        if attr == "peak_bytes":
            assert v == max(a.peak_bytes, b.peak_bytes)
        elif isinstance(v, int):
            assert v == getattr(a, attr) + getattr(b, attr), attr
        elif isinstance(v, dict) and attr != "compile_seconds":
            assert all(n == 15 for n in v.values()), attr
    assert t.latency.count == 2 and t.latency.sum == a.latency.sum + b.latency.sum
    assert t.compile_seconds["llvm"].count == 2 and t.calls == a.calls + b.calls

"""Saved traces (jit/persist.py): a new process serves a function another
process traced, without tracing or compiling, and never when the function,
something it reads, or the shapes its guards accept differ."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from jit.fingerprint import Unstable, function_fingerprint, stable_text
from runtime.cache import ArtifactCache, unpack_record
from shapes import host

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The jitted function lives in model.py (user code, fingerprinted by its
# code); the driver calls it once per requested row count and reports.
DRIVER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from jit import jit
    import model

    f = jit(model.fn)
    report = {"ok": True}
    for rows in map(int, sys.argv[1:]):
        x = np.random.default_rng(rows).standard_normal((rows, 24)).astype(np.float32)
        y = f(x)
        ref = model.fn(x)
        report["ok"] &= bool(y.shape == ref.shape and y.dtype == ref.dtype and np.allclose(y, ref, rtol=1e-5, atol=1e-5))
    report.update(f.stats())
    report["explain"] = f.explain()
    print(json.dumps(report))
""")

MODEL = """
import numpy as np
SCALE = 2.0
W = np.linspace(-1.0, 1.0, 24 * 40, dtype=np.float32).reshape(24, 40)

def helper(y):
    return np.tanh(y) * SCALE

def fn(x):
    return (helper(x + 1.0) - x.mean(-1, keepdims=True)) @ W
"""


def run(tmp_path, rows, model=MODEL, extra=None, env_extra=None, driver=DRIVER):
    (tmp_path / "model.py").write_text(textwrap.dedent(model))
    for name, text in (extra or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    (tmp_path / "driver.py").write_text(textwrap.dedent(driver))
    env = dict(os.environ, SHAPEJIT_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]), PYTHONDONTWRITEBYTECODE="1")
    env.pop("SHAPEJIT_TRACE_CACHE", None)
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, str(tmp_path / "driver.py"), *map(str, rows)], env=env,
                         capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_serves_new_shapes_without_tracing(tmp_path):
    first = run(tmp_path, [37])
    assert first["ok"] and first["traces"] == 1 and first["compiles"] == 1
    second = run(tmp_path, [1234, 5])  # shapes the first process never saw
    assert second["ok"]
    assert second["traces"] == 0 and second["compiles"] == 0
    assert second["cache_hits_disk"] == 1
    assert "a saved trace from the disk cache" in second["explain"]
    assert "tanh" in second["explain"]  # the saved graph is there for explain()
    assert "gemm kernel:" in second["explain"]  # the matmul ran on the GEMM library kernel, loaded from disk


WIDE_MODEL = """
import numpy as np
W = np.linspace(-1.0, 1.0, 24 * 200, dtype=np.float32).reshape(24, 200)

def fn(x):
    return np.tanh(x) @ W
"""


@pytest.mark.skipif(not host.has_avx512(), reason="needs a host with AVX-512 to force the narrower ISA")
def test_a_trace_saved_for_another_isa_is_not_served(tmp_path):
    """An executable holds the GEMM tile's width (its strip counts): a trace
    saved on the host's AVX-512 and served to SHAPEJIT_ISA=avx2's narrower
    kernel computed a quarter of each product's columns.  Each ISA traces
    its own, and finds it again."""
    rows = [300]  # (no calibration: the product's class is raced, the kernel's result the call's)
    assert run(tmp_path, rows, model=WIDE_MODEL)["traces"] == 1
    narrow = run(tmp_path, rows, model=WIDE_MODEL, env_extra={"SHAPEJIT_ISA": "avx2"})
    assert narrow["ok"] and narrow["traces"] == 1
    again = run(tmp_path, rows, model=WIDE_MODEL, env_extra={"SHAPEJIT_ISA": "avx2"})
    assert again["ok"] and again["traces"] == 0 and again["cache_hits_disk"] == 1


def test_the_target_is_part_of_a_saved_trace_key(monkeypatch):
    """(on any host) the saved trace's key changes with the target description."""
    from jit import compile as compile_mod
    before = compile_mod.plan_switches()
    monkeypatch.setattr(compile_mod, "target_description", lambda: "x86_64|another-cpu|+avx2,-avx512f")
    assert compile_mod.plan_switches() != before


@pytest.mark.slow
@pytest.mark.parametrize("edit", [
    pytest.param(lambda m: m.replace("- x.mean(", "+ x.mean("), id="function body"),
    pytest.param(lambda m: m.replace("SCALE = 2.0", "SCALE = 3.0"), id="global constant"),
    pytest.param(lambda m: m.replace("np.tanh(y)", "np.sin(y)"), id="helper body"),
])
def test_an_edit_to_the_function_or_what_it_reads_is_a_miss(tmp_path, edit):
    assert run(tmp_path, [40])["traces"] == 1
    after = run(tmp_path, [41], model=edit(MODEL))
    assert after["ok"], "a stale saved trace was used"
    assert after["traces"] == 1


def test_an_attribute_of_a_user_module_is_part_of_the_fingerprint(tmp_path):
    model = """
        import numpy as np
        import cfg

        def fn(x):
            return x * cfg.FACTOR + np.exp(x)
    """
    assert run(tmp_path, [9], model=model, extra={"cfg.py": "FACTOR = 2.0\n"})["traces"] == 1
    same = run(tmp_path, [10], model=model, extra={"cfg.py": "FACTOR = 2.0\n"})
    assert same["ok"] and same["traces"] == 0
    changed = run(tmp_path, [11], model=model, extra={"cfg.py": "FACTOR = 5.0\n"})
    assert changed["ok"] and changed["traces"] == 1


def test_a_global_object_without_identity_is_traced_in_every_process(tmp_path):
    model = """
        import numpy as np

        class Settings:
            scale = 2.0

        settings = Settings()

        def fn(x):
            return np.exp(x) * settings.scale
    """
    assert run(tmp_path, [8], model=model)["traces"] == 1
    again = run(tmp_path, [8], model=model)
    assert again["ok"] and again["traces"] == 1 and again["compiles"] == 0  # object code still shared
    assert "traces not saved" in again["explain"] and "settings" in again["explain"]


# A model held by an object (jit(net.forward)): what forward reads of the
# instance (a float, a library function, a user function, a method, an array)
# is chosen by the environment, so two processes run the same code on
# differently configured instances.
NET = """
import os
import types
import numpy as np

def double(y):
    return y * 2.0

def halve(y):
    return y * 0.5

class Net:
    def __init__(self):
        self.scale = float(os.environ.get("NET_SCALE", "2.0"))
        self.act = np.sin if os.environ.get("NET_ACT") == "sin" else np.tanh
        self.post = halve if os.environ.get("NET_POST") == "halve" else double
        self.w = np.linspace(-1.0, 1.0, 24 * 40, dtype=np.float32).reshape(24, 40)
        self.cfg = types.SimpleNamespace(shift=1.0)

    def _mix(self, y):
        return y - y.mean(-1, keepdims=True)

    def forward(self, x):
        return self.post(self._mix(self.act(x * self.scale))) @ self.w

fn = Net().forward
"""


@pytest.mark.slow
@pytest.mark.parametrize("change", [
    pytest.param({"env": {"NET_SCALE": "3.0"}}, id="a float attribute"),
    pytest.param({"env": {"NET_ACT": "sin"}}, id="a numpy function attribute"),
    pytest.param({"env": {"NET_POST": "halve"}}, id="a user function attribute"),
    pytest.param({"model": NET.replace("y - y.mean(", "y + y.mean(")}, id="a method it calls"),
    pytest.param({"model": NET.replace("(24, 40)", "(24, 41)").replace("24 * 40", "24 * 41")}, id="a held array"),
])
def test_a_method_of_a_model_object_is_served_from_a_saved_trace_only_for_the_same_model(tmp_path, change):
    """jit(net.forward): the second process loads the trace (its key holds
    the method's and class's code; the saved entry the values it read of
    the instance); a differently configured instance or edited class traces
    again and is right."""
    first = run(tmp_path, [37], model=NET)
    assert first["ok"] and first["traces"] == 1 and "traces not saved" not in first["explain"]
    same = run(tmp_path, [5, 37], model=NET)
    assert same["ok"] and same["traces"] == 0 and same["compiles"] == 0
    other = run(tmp_path, [5], model=change.get("model", NET), env_extra=change.get("env"))
    assert other["ok"], "a stale saved trace was used"
    assert other["traces"] == 1


def test_a_value_no_key_holds_is_not_saved(tmp_path):
    """A trace that read a value of the instance no token describes (a
    library object's attribute) is traced in every process, and explain()
    says which value."""
    model = NET.replace("return self.post(", "return self.cfg.shift + self.post(")
    assert run(tmp_path, [8], model=model)["traces"] == 1
    again = run(tmp_path, [8], model=model)
    assert again["ok"] and again["traces"] == 1 and again["compiles"] == 0  # (object code still shared)
    assert "not saved" in again["explain"] and "self.cfg" in again["explain"]


def test_saved_entries_serve_only_shapes_their_guards_accept(tmp_path):
    model = """
        import numpy as np

        def fn(x):
            if x.shape[0] > 128:
                return np.exp(x) * 2.0
            return np.exp(x) * 3.0
    """
    assert run(tmp_path, [10], model=model)["traces"] == 1  # guard: s0 <= 128
    big = run(tmp_path, [500], model=model)
    assert big["ok"] and big["traces"] == 1                   # the saved entry's guard fails
    both = run(tmp_path, [50, 700], model=model)
    assert both["ok"] and both["traces"] == 0 and both["cache_hits_disk"] == 2


def test_a_damaged_trace_record_is_dropped_and_traced_again(tmp_path):
    assert run(tmp_path, [30])["traces"] == 1
    c = ArtifactCache(str(tmp_path / "cache"))
    damaged = 0
    for e in c.entries():
        if e.kind == "trace":
            blob = c._disk.get(e.key)
            c._disk.set(e.key, blob[:-90] + bytes(b ^ 0x33 for b in blob[-90:-60]) + blob[-60:])  # (the payload)
            damaged += 1
    assert damaged == 1
    again = run(tmp_path, [31])
    assert again["ok"] and again["traces"] == 1 and again["compiles"] == 0
    assert run(tmp_path, [32])["traces"] == 0  # the retrace saved a good record


def test_saved_traces_can_be_turned_off(tmp_path):
    run(tmp_path, [12])
    off = run(tmp_path, [13], env_extra={"SHAPEJIT_TRACE_CACHE": "0"})
    assert off["ok"] and off["traces"] == 1 and off["compiles"] == 0


# ------------------------------------------------------------- fingerprints

def _fn(src: str, **globals_):
    ns = {"np": np, **globals_}
    exec(textwrap.dedent(src), ns)
    return ns["f"]


def test_fingerprint_follows_code_constants_closures_and_arrays():
    base = function_fingerprint(_fn("def f(x):\n    return x * 2.0\n"))[0]
    assert base is not None
    assert function_fingerprint(_fn("def f(x):\n    return x * 2.0\n"))[0] == base
    assert function_fingerprint(_fn("def f(x):\n    return x * 3.0\n"))[0] != base
    w1 = np.arange(6.0)
    with_w = function_fingerprint(_fn("def f(x):\n    return x * W\n", W=w1))[0]
    assert function_fingerprint(_fn("def f(x):\n    return x * W\n", W=w1.copy()))[0] == with_w
    w2 = w1.copy()
    w2[3] = -1
    assert function_fingerprint(_fn("def f(x):\n    return x * W\n", W=w2))[0] != with_w

    def make(k):
        return lambda x: x * k
    assert function_fingerprint(make(2.0))[0] != function_fingerprint(make(3.0))[0]
    assert function_fingerprint(_fn("def f(x, a=1):\n    return x * a\n"))[0] != \
        function_fingerprint(_fn("def f(x, a=2):\n    return x * a\n"))[0]
    # indexing constants (rotary embeddings' x[..., ::2]): Ellipsis and slices have an identity
    even = function_fingerprint(_fn("def f(x):\n    return x[..., ::2]\n"))[0]
    assert even is not None and even == function_fingerprint(_fn("def f(x):\n    return x[..., ::2]\n"))[0]
    assert even != function_fingerprint(_fn("def f(x):\n    return x[..., 1::2]\n"))[0]
    assert stable_text((Ellipsis, slice(1, None, 2))) != stable_text((Ellipsis, slice(0, None, 2)))


def test_fingerprint_refuses_values_without_identity():
    class Thing:
        pass
    digest, why = function_fingerprint(_fn("def f(x):\n    return x * t.k\n", t=Thing()))
    assert digest is None and "'t'" in why
    with pytest.raises(Unstable):
        stable_text(((np.dtype("float32"), (-1, 3), True), (Thing, Thing())))
    assert stable_text((tuple, (None, None))) == stable_text((tuple, (None, None)))
    import fractions
    digest, why = function_fingerprint(fractions.Fraction(1, 3).limit_denominator)
    assert digest is None and "a method of a fractions.Fraction object" in why


def test_stats_count_the_eager_nodes_of_a_loaded_entry(tmp_path):
    """stats() reports a saved entry's eager nodes before explain() reads
    its details (they are counted in the record)."""
    model = """
    import numpy as np

    def fn(x):
        return np.unwrap(x, axis=-1) * 2.0 + np.gradient(x, axis=-1)
    """
    first = run(tmp_path, [7], model=model)
    assert first["ok"] and first["traces"] == 1 and first["eager_nodes"] == 2
    second = run(tmp_path, [9], model=model)
    assert second["ok"] and second["traces"] == 0 and second["cache_hits_disk"] == 1
    assert second["eager_nodes"] == 2


def test_records_are_plain_data_and_a_user_function_in_an_eager_step_is_not_saved(tmp_path):
    """A saved trace is JSON (runtime/plain.py), never a pickle; an eager step
    that calls the user's own function has no plain form: the trace is not
    saved, explain() says why, and the next process traces it again."""
    first = run(tmp_path, [7])
    c = ArtifactCache(str(tmp_path / "cache"))
    traces = [e for e in c.entries() if e.kind == "trace"]
    assert len(traces) == 1
    _, payload = unpack_record(traces[0].key, c._disk.get(traces[0].key), None)
    assert json.loads(payload)[0] == "l"  # a list of entries, as plain data
    model = """
    import numpy as np

    def norm(r):
        return r / (np.abs(r).sum() + 1.0)

    def fn(x):
        return np.apply_along_axis(norm, -1, x) * 2.0
    """
    first = run(tmp_path, [5], model=model)
    assert first["ok"] and first["traces"] == 1
    assert "trace not saved" in first["explain"] and "model.norm" in first["explain"]
    second = run(tmp_path, [6], model=model)
    assert second["ok"] and second["traces"] == 1  # (its object code, though, comes from the disk cache)


SCAN_MODEL = """
import numpy as np

def fn(x):
    h = np.zeros(x.shape[1], np.float32)
    for t in range(x.shape[0]):
        h = np.tanh(x[t] + h * np.float32(0.5))
    return h
"""


def test_a_scan_is_served_from_a_saved_trace(tmp_path):
    """A loop compiled as a scan (jit/scan.py) is saved with its entry: a
    new process serves every trip count without tracing or compiling (before:
    it traced and compiled again, unrolling the first count it met)."""
    first = run(tmp_path, [5, 9, 7], model=SCAN_MODEL)  # (two counts unrolled, then the scan)
    assert first["ok"] and first["traces"] == 3 and "a scan" in first["explain"]
    second = run(tmp_path, [13, 6, 30], model=SCAN_MODEL)
    assert second["ok"] and second["traces"] == 0 and second["compiles"] == 0, second
    # (the scan's entry, loaded for 13 trips, serves 6 and 30 too)
    assert second["cache_hits_disk"] == 1 and second["entry_hits"] == 2 and "a scan" in second["explain"]


@pytest.mark.parametrize("how", ["in a helper", "reading its frame"])
def test_a_scan_another_process_could_not_make_again_is_not_saved(tmp_path, how):
    """A loop in a function the jit calls (its site is that function's), or
    whose body reads a local object (its closure, no plain data): the entry
    is not saved, explain() says why, and a new process traces it again."""
    if how == "in a helper":
        model = SCAN_MODEL.replace("def fn(x):", "def fn(x):\n    return loop(x)\n\ndef loop(x):")
    else:
        model = SCAN_MODEL.replace("    h = np.zeros", "    act = np.tanh\n    h = np.zeros").replace(
            "h = np.tanh(", "h = act(")
    first = run(tmp_path, [5, 9, 7], model=model)
    assert first["ok"] and "a scan" in first["explain"], first["explain"]
    assert "not saved: Unsaved: the scan of the loop" in first["explain"], first["explain"]  # (not a codec's)
    second = run(tmp_path, [13], model=model)
    assert second["ok"] and second["traces"] >= 1


PRINT_MODEL = """
import numpy as np

def fn(x):
    print("rows", x.shape[0], "cols", x.shape[1], sep=";")
    return np.tanh(x) * 2.0
"""


def test_an_entry_that_prints_is_served_from_a_saved_trace_and_prints(tmp_path):
    """A print's effect node is plain data (its text's constant parts and
    slots): a new process loads the entry, no trace, and prints each call's
    values as numpy's run does."""
    first = run(tmp_path, [5], model=PRINT_MODEL)
    assert first["ok"] and first["traces"] == 1
    out = subprocess.run([sys.executable, str(tmp_path / "driver.py"), "7", "9"], capture_output=True, text=True,
                         timeout=120, cwd=str(tmp_path),
                         env=dict(os.environ, SHAPEJIT_CACHE_DIR=str(tmp_path / "cache"),
                                  PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]), PYTHONDONTWRITEBYTECODE="1"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    report = json.loads(lines[-1])
    assert report["ok"] and report["traces"] == 0 and report["cache_hits_disk"] == 1, report
    # (the driver calls the jitted function, then numpy's, for each row count)
    assert lines[:-1] == ["rows;7;cols;24", "rows;7;cols;24", "rows;9;cols;24", "rows;9;cols;24"]


RECORDS = """
import dataclasses
from collections import namedtuple
from typing import NamedTuple
import numpy as np

Pair = namedtuple("Pair", "a b")

class Out(NamedTuple):
    y: np.ndarray
    total: np.ndarray
    SHIFT = 1.0

    def scaled(self, k):
        return self.y * k

@dataclasses.dataclass(frozen=True)
class Cfg:
    scale: float = 2.0
    act: str = "relu"

def fn(p, cfg):
    y = (p.a + p.b) * cfg.scale + Out.SHIFT
    y = np.maximum(y, 0.0) if cfg.act == "relu" else y
    return Out(y, y.sum())
"""

RECORDS_DRIVER = """
import json, sys
import numpy as np
from jit import jit
import model

f = jit(model.fn)
x = np.linspace(-3.0, 3.0, int(sys.argv[1]))
got, want = f(model.Pair(x, x * 2), model.Cfg()), model.fn(model.Pair(x, x * 2), model.Cfg())
ok = type(got) is model.Out and all(np.array_equal(g, w) for g, w in zip(got, want))
print(json.dumps({"ok": ok, **f.stats()}))
"""


@pytest.mark.parametrize("edit", [
    lambda m: m.replace("SHIFT = 1.0", "SHIFT = 3.0"),                    # a class attribute the trace read
    lambda m: m.replace('act: str = "relu"', 'act: str = "none"'),        # a dataclass field's default
    lambda m: m.replace("return self.y * k", "return self.y * k * 2"),     # a method's code
], ids=["class-attribute", "field-default", "method"])
def test_namedtuple_and_dataclass_arguments_and_results_are_served_from_saved_traces(tmp_path, edit):
    """A namedtuple argument (the call's tree holds its class), a frozen
    dataclass static argument and a namedtuple result have a form another
    process recognizes (the class's name, fields, defaults, class attributes
    and methods' code): a new process serves them without tracing (each was
    traced in every process); an edit to the class is a miss."""
    def go(model):
        return run(tmp_path, [7], model=model, driver=RECORDS_DRIVER)
    first = go(RECORDS)
    assert first["ok"] and first["traces"] == 1
    again = go(RECORDS)
    assert again["ok"] and again["traces"] == 0 and again["cache_hits_disk"] >= 1
    edited = go(edit(RECORDS))
    assert edited["ok"] and edited["traces"] == 1


METHODS = """
import numpy as np
from jit import jit

class M:
    def __init__(self, k):
        self.k = k

    @jit
    def f(self, x):
        return np.tanh(x * self.k)

@jit
def takes_model(model, x):
    return np.tanh(x * model.k) + 1
"""

METHODS_DRIVER = """
import json, sys
import numpy as np
import model

m = model.M(float(sys.argv[1]))
x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
ok = np.allclose(m.f(x), np.tanh(x * m.k)) and np.allclose(model.takes_model(m, x), np.tanh(x * m.k) + 1)
print(json.dumps({"ok": bool(ok), "traces": model.M.f.stats()["traces"] + model.takes_model.stats()["traces"]}))
"""


def test_a_jitted_method_and_a_function_taking_an_object_are_served_from_saved_traces(tmp_path):
    """An object of the user's class is keyed by its class (by name and its
    methods' code) and what the trace read of it: a new process serves a
    jitted method without tracing (it traced in every process), and only
    while what it read (self.k) is the same."""
    def go(k):
        return run(tmp_path, [k], model=METHODS, driver=METHODS_DRIVER)
    assert go(2.0) == {"ok": True, "traces": 2}
    assert go(2.0) == {"ok": True, "traces": 0}
    assert go(3.0) == {"ok": True, "traces": 2}


STEP_DRIVER = textwrap.dedent("""
    import json, sys
    import numpy as np
    from jit import jit
    import model

    f = jit(model.fn)
    report = {"ok": True}
    x = np.arange(6.0)
    for step in map(int, sys.argv[1:]):
        model.STEP = step
        report["ok"] &= bool(np.array_equal(f(x), model.fn(x)))
    report.update(f.stats())
    report["explain"] = f.explain()
    print(json.dumps(report))
""")

STEP_MODEL = """
import numpy as np
STEP = 0

def fn(x):
    return x * STEP + 1.0
"""


def test_a_trace_saved_for_one_value_of_an_int_is_not_served_once_it_is_a_symbol(tmp_path):
    """A global int that changes becomes a symbol (its key: its type); a
    trace another process saved for one of its values must not be loaded
    under that key (it would serve every value), and a trace made with the
    symbol is not saved (its value is bound per process)."""
    first = run(tmp_path, [1], model=STEP_MODEL, driver=STEP_DRIVER)
    assert first["ok"] and first["traces"] == 1
    second = run(tmp_path, [2, 1, 3, 1, 5], model=STEP_MODEL, driver=STEP_DRIVER)
    assert second["ok"], second["explain"]
    assert second["traces"] == 2 and "int STEP changed: now a symbol" in second["explain"]
    assert "trace not saved: held numbers keyed by their type" in second["explain"]


STATE_MODEL = """
import numpy as np
from jit import jit

class Smoother:
    def __init__(self):
        self.avg = np.zeros(4)
        self.energy = 0.0

    @jit
    def update(self, x):
        self.avg = 0.9 * self.avg + 0.1 * x.mean(0)
        self.energy = float((x * x).sum())
        return np.tanh(x - self.avg)
"""

STATE_DRIVER = """
import json, sys
import numpy as np
import model

m, ref = model.Smoother(), model.Smoother()
plain = model.Smoother.update.fn
ok = True
for rows in map(int, sys.argv[1:]):
    x = np.linspace(-1.0, 1.0, rows * 4).reshape(rows, 4)
    ok &= bool(np.allclose(m.update(x), plain(ref, x)) and np.allclose(m.avg, ref.avg)
          and np.isclose(m.energy, ref.energy, rtol=1e-14))
    ok &= type(m.energy) is float
st = model.Smoother.update.stats()
print(json.dumps({"ok": ok, "traces": st["traces"], "disk": st["cache_hits_disk"],
                  "explain": model.Smoother.update.explain()}))
"""


def test_a_trace_that_assigns_attributes_is_served_from_a_saved_trace(tmp_path):
    """A method that keeps state on its object (a running average, a
    number) is saved like any trace: a new process serves it without
    tracing, and assigns the attributes after every call as numpy would."""
    first = run(tmp_path, [3, 5, 8], model=STATE_MODEL, driver=STATE_DRIVER)
    assert first["ok"] and first["traces"] == 1, first["explain"]
    assert "trace not saved" not in first["explain"]
    second = run(tmp_path, [6, 2, 9], model=STATE_MODEL, driver=STATE_DRIVER)
    assert second["ok"] and second["traces"] == 0 and second["disk"] == 1, second["explain"]

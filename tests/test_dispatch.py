"""The calibrated dispatch of products (runtime/dispatch.py): the cost
model, the decision tree learned from its votes (deterministic for a given
calibration, its generated code agreeing with it), the round trip through
the persistent cache, a new calibration for another CPU, and the runtime
deciding shape classes by the tree, which explain() prints."""
import os
import time

import numpy as np
import pytest

from jit import compile as compile_mod
from jit import jit
from runtime import dispatch, gemmchoice
from runtime.cache import default_cache
from shapes.kernelargs import rows_alias


def synthetic(blas_rows: int, cpu="test-cpu") -> dispatch.Calibration:
    """numpy's matmul 10x faster up to `blas_rows` rows, 2x slower above."""
    times = []
    for k, n in dispatch.GRID_KN:
        for m in dispatch.GRID_M:
            t = 1e-11 * m * k * n
            times.append((m, k, n, t, t / 10 if m <= blas_rows else 2 * t))
    return dispatch.Calibration(cpu, "f", 16, 2, tuple(times))


@pytest.fixture
def trees():
    gemmchoice.TREES.clear()
    gemmchoice.forget()
    yield gemmchoice.TREES
    gemmchoice.TREES.clear()
    gemmchoice.forget()


def test_the_model_charges_padding_and_balance():
    cal = synthetic(0)
    tk, tb = dispatch.predict(cal, 64, 768, 768)  # (a grid shape: as measured)
    assert tk == pytest.approx(1e-11 * 64 * 768 * 768) and tb == pytest.approx(2 * tk)
    # one column past a strip costs a whole strip, and 49 strips on 2 threads take 25 rounds
    tk_odd, _ = dispatch.predict(cal, 64, 769, 768)
    assert tk_odd == pytest.approx(tk * (49 * 16 / 769) * (25 * 2 / 49) * 769 / 768)


def test_the_tree_follows_the_votes_and_is_deterministic():
    cal = synthetic(4)
    samples = dispatch.votes(cal, margin=2.5)
    tree = dispatch.learn(samples)
    assert tree == dispatch.learn(dispatch.votes(cal, 2.5))  # (the same calibration, the same tree)
    assert all(tree(*x) == blas for x, blas in samples)  # (a split on M alone separates these votes)
    assert tree(3, 100, 100) and not tree(9, 100, 100)
    choose = dispatch.compile_tree(tree)
    assert all(choose(*x) == tree(*x) for x, _ in samples)
    assert "M <= 4:" in dispatch.describe(tree)


def test_a_margin_keeps_products_on_the_kernel():
    cal = synthetic(1024)  # numpy's 10x faster everywhere alone...
    assert dispatch.learn(dispatch.votes(cal, margin=20.0)) == dispatch.Tree(leaf=False)


def test_a_near_tie_goes_to_the_kernel():
    """numpy's matmul faster by less than TIE everywhere: noise, the kernel
    keeps every product; faster by more: numpy's takes every one."""
    def calibration(blas_speedup):
        return dispatch.Calibration("test-cpu", "f", 16, 2, tuple(
            (m, k, n, 1e-11 * m * k * n, 1e-11 * m * k * n / blas_speedup)
            for k, n in dispatch.GRID_KN for m in dispatch.GRID_M))
    near = (1 + dispatch.TIE) / 2
    assert dispatch.learn(dispatch.votes(calibration(near), 1.0)) == dispatch.Tree(leaf=False)
    assert dispatch.learn(dispatch.votes(calibration(dispatch.TIE * 1.02), 1.0)) == dispatch.Tree(leaf=True)


def test_the_record_round_trips_and_refuses_garbage():
    cal = synthetic(8)
    tree = dispatch.learn(dispatch.votes(cal, 2.5))
    assert dispatch.from_record(dispatch.record(cal, tree)) == (cal, tree)
    with pytest.raises(ValueError):
        dispatch.tree_from_json([7, 1, True, False])


def test_calibrated_once_kept_and_loaded_and_recalibrated_for_another_cpu(trees, monkeypatch):
    monkeypatch.setenv("SHAPEJIT_CALIBRATE", "1")
    events = dict(dispatch.EVENTS)
    cal, tree = compile_mod.calibrate_gemm(np.float32, rounds=1, grid_m=(1, 8, 64), grid_kn=((64, 256),))
    assert [t[:3] for t in cal.times] == [(1, 64, 256), (8, 64, 256), (64, 64, 256)]
    assert all(t[3] > 0 and t[4] > 0 for t in cal.times)
    assert trees["f"][0] == tree
    assert dispatch.EVENTS == events  # (calibrating in the foreground started none in the background)
    trees.clear()
    compile_mod._load_dispatch(np.float32)  # (another process: from the persistent cache)
    assert trees["f"][0] == tree
    trees.clear()
    monkeypatch.setenv("SHAPEJIT_CALIBRATE", "0")
    real = compile_mod.target_description
    monkeypatch.setattr(compile_mod, "target_description", lambda: real() + "|another cpu")
    compile_mod._load_dispatch(np.float32)
    assert "f" not in trees  # (not this CPU's; SHAPEJIT_CALIBRATE=0: raced until `python -m jit calibrate`)
    monkeypatch.undo()
    monkeypatch.setenv("SHAPEJIT_CALIBRATE", "0")
    other = "SkylakeX" if os.environ.get("OPENBLAS_CORETYPE") == "Haswell" else "Haswell"
    monkeypatch.setenv("OPENBLAS_CORETYPE", other)  # (numpy's BLAS on other kernels: its times are not these)
    compile_mod._load_dispatch(np.float32)
    assert "f" not in trees


def _await_tree(trees, char="f", seconds=300.0):
    deadline = time.monotonic() + seconds
    while char not in trees and time.monotonic() < deadline:
        time.sleep(0.2)
    return trees.get(char)


@pytest.mark.slow
def test_a_cpu_without_calibration_is_calibrated_in_the_background_once(trees, monkeypatch):
    monkeypatch.setenv("SHAPEJIT_CALIBRATE", "1")
    monkeypatch.setattr(compile_mod, "CALIBRATION_ROUNDS", 1)
    cache = default_cache()
    events = dict(dispatch.EVENTS)
    key = compile_mod._dispatch_key(np.float32)
    assert compile_mod._load_dispatch(np.float32) is False  # (returns at once: the calibration is not awaited)
    assert cache.get("claim-" + key, memory=False)[0] is not None  # (claimed for every process of this CPU)
    assert dispatch.EVENTS["started"] == events["started"] + 1
    assert compile_mod.calibrating()
    tree = _await_tree(trees)
    assert tree is not None, "the background calibration never arrived"
    cal, stored = dispatch.from_record(cache.get(key, memory=False)[0])
    assert stored == tree[0] and len(cal.times) == len(dispatch.GRID_M) * len(dispatch.GRID_KN)
    assert dispatch.EVENTS["installed"] == events["installed"] + 1
    for _ in range(50):  # (the waiting thread drops the claim and finishes right after installing)
        if not compile_mod.calibrating():
            break
        time.sleep(0.1)
    assert cache.get("claim-" + key, memory=False)[0] is None and not compile_mod.calibrating()

    trees.clear()  # another process on this CPU: the kept tree, nothing started
    assert compile_mod._load_dispatch(np.float32) is True
    assert trees["f"][0] == tree[0] and dispatch.EVENTS["started"] == events["started"] + 1

    trees.clear()  # another CPU description (a new machine under the same cache): calibrated again
    real = compile_mod.target_description
    monkeypatch.setattr(compile_mod, "target_description", lambda: real() + "|another cpu")
    assert compile_mod._load_dispatch(np.float32) is False
    assert dispatch.EVENTS["started"] == events["started"] + 2
    assert _await_tree(trees) is not None
    assert cache.get(compile_mod._dispatch_key(np.float32), memory=False)[0] is not None


def test_a_claimed_calibration_is_not_started_twice(trees, monkeypatch):
    monkeypatch.setenv("SHAPEJIT_CALIBRATE", "1")
    monkeypatch.setattr(compile_mod, "CALIBRATION_POLL", 0.05)
    key = compile_mod._dispatch_key(np.float32)
    assert default_cache().claim("claim-" + key, 60, "(another process)")
    events = dict(dispatch.EVENTS)
    assert compile_mod._load_dispatch(np.float32) is False
    assert dispatch.EVENTS["started"] == events["started"]  # (another process is at it: this one waits)
    cal = synthetic(8)
    tree = dispatch.learn(dispatch.votes(cal, 2.5))
    default_cache().put(key, dispatch.record(cal, tree), kind="calibration")  # (that process's result)
    assert _await_tree(trees, seconds=30)[0] == tree


def test_the_tree_decides_new_classes_and_explain_shows_it(trees, monkeypatch):
    monkeypatch.setattr(gemmchoice, "PREFER", None)
    gemmchoice.install("f", dispatch.Tree(feature=0, threshold=4, low=dispatch.Tree(leaf=True),
                                          high=dispatch.Tree(leaf=False)))
    calls = []
    real = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    f = jit(lambda x, w: np.tanh(x @ w))
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, dispatch.FEWEST_N)).astype(np.float32)  # (a tree decides no fewer columns)
    for m, on_blas in ((3, True), (40, False), (2, True)):
        x = rng.standard_normal((m, 64)).astype(np.float32)
        f(x, w)
        calls.clear()
        np.testing.assert_allclose(f(x, w), np.tanh(x @ w), rtol=1e-5, atol=1e-5)
        assert len(calls) == int(on_blas)  # (no race: the tree decided the class on sight)
        text = f.explain()
        assert ("on numpy's matmul (BLAS)" if on_blas else "on the GEMM kernel") in text  # (how the last call ran)
    assert "product dispatch calibrated on this CPU" in text and "M <= 4:" in text


class _Switches:
    """resource.getrusage for dispatch._time: ru_nivcsw grows at the calls
    `busy` says (a run another process interrupted)."""

    def __init__(self, busy):
        self.calls, self.busy, self.count = 0, busy, 0

    def __call__(self, who):
        self.calls += 1
        if self.busy(self.calls):
            self.count += 1
        return type("Usage", (), {"ru_nivcsw": self.count})()


def _small_calibration(monkeypatch, busy):
    monkeypatch.setattr(dispatch, "SETTLE", 0.0)
    switches = _Switches(busy)
    monkeypatch.setattr(dispatch.resource, "getrusage", switches)
    return dispatch.calibrate(np.float32, lambda a, b, c: np.matmul(a, b, out=c), "test-cpu", 16, 2,
                              grid_m=(1, 2, 4, 8, 16), grid_kn=((8, 8), (16, 8))), switches


def test_a_calibration_reads_its_b_from_memory(monkeypatch):
    """Each run of a variant reads another copy of B, the copies of a shape
    together twice the last-level cache: B comes from memory, as a model's
    weights do."""
    monkeypatch.setattr(dispatch, "SETTLE", 0.0)
    monkeypatch.setattr(dispatch.host, "last_level_cache_bytes", lambda: 8 * 16 * 4 * 5)
    seen = []

    def kernel(a, b, c):
        seen.append((a.shape, b.shape, id(b), b.nbytes))
        np.matmul(a, b, out=c)
    dispatch.calibrate(np.float32, kernel, "test-cpu", 16, 2, grid_m=(1, 4), grid_kn=((8, 16), (16, 8)), rounds=3)
    for shape in {s[:2] for s in seen}:
        runs = [s for s in seen if s[:2] == shape]
        assert all(x[2] != y[2] for x, y in zip(runs, runs[1:]))  # (the warm-up's copy is not the timed run's)
    for kn in ((8, 16), (16, 8)):
        # (of the 10 copies: the kernel's runs and numpy's take them in turn)
        assert len({s[2] for s in seen if s[1] == kn}) >= 6
    assert dispatch.cold_copies(512) == 10
    for llc in (32 << 20, 96 << 20):  # (a 768 x 768 float32 B: 2.25 MiB)
        monkeypatch.setattr(dispatch.host, "last_level_cache_bytes", lambda: llc)
        assert 2 * llc <= dispatch.cold_copies(768 * 768 * 4) * 768 * 768 * 4 < 2 * llc + 768 * 768 * 4
    assert dispatch.cold_copies(64) == dispatch.MAX_COPIES


def test_a_calibration_on_a_busy_machine_keeps_nothing(monkeypatch):
    """Every run interrupted by another process: no time is clean, so no
    calibration (a tree learned from such times would be kept for good),
    unless SHAPEJIT_CALIBRATE_BUSY says to keep it anyway."""
    monkeypatch.delenv("SHAPEJIT_CALIBRATE_BUSY", raising=False)
    with pytest.raises(dispatch.Disturbed, match="too busy to calibrate"):
        _small_calibration(monkeypatch, lambda call: True)
    monkeypatch.setenv("SHAPEJIT_CALIBRATE_BUSY", "1")
    cal, _ = _small_calibration(monkeypatch, lambda call: True)
    assert len(cal.times) == 10


def test_a_calibration_with_a_few_interrupted_runs_is_kept(monkeypatch):
    """Runs interrupted now and then: retried, clean times kept, no extra
    pass needed when every shape got one."""
    cal, switches = _small_calibration(monkeypatch, lambda call: call % 6 == 0)
    assert len(cal.times) == 10 and all(tk > 0 and tb > 0 for *_, tk, tb in cal.times)
    assert all(tk < 1.0 and tb < 1.0 for *_, tk, tb in cal.times)
    # 3 passes x 2 variants x 10 shapes, each one or more timed runs (two getrusage calls a run)
    assert switches.calls < 2 * 3 * 2 * 10 * 2


def test_the_tree_tells_b_rows_that_alias_apart(trees, monkeypatch):
    """numpy's matmul 10x faster where B's rows alias (the kernel packs such
    a B where it streams another of the same size), 10x slower elsewhere:
    the votes split on the flag, the tree and its generated code follow it,
    explain() names it, and a shape class of either kind takes its side."""
    times = []
    for k, n in dispatch.GRID_KN:
        for m in dispatch.GRID_M:
            t = 1e-11 * m * k * n
            times.append((m, k, n, t, t / 10 if rows_alias(n, 4) else 10 * t))
    cal = dispatch.Calibration("test-cpu", "f", 16, 2, tuple(times))
    tree = dispatch.learn(dispatch.votes(cal, 1.0))
    choose = dispatch.compile_tree(tree)
    for m, n, k in ((8, 3072, 768), (8, 2304, 768), (300, 1024, 64), (300, 1280, 64)):
        alias = int(rows_alias(n, 4))
        assert tree(m, n, k, alias) is bool(alias) and choose(m, n, k, alias) is bool(alias)
    assert "B's rows alias:" in "\n".join(dispatch.describe(tree))
    monkeypatch.setattr(gemmchoice, "PREFER", None)
    gemmchoice.install("f", tree)
    assert gemmchoice.BEST[gemmchoice.shape_class("f", 8, 3072, 768)] is True
    assert gemmchoice.BEST[gemmchoice.shape_class("f", 8, 2304, 768)] is False

"""DietCode-style dispatch of a product between its variants, calibrated
once per CPU (issue 12; DESIGN.md section 8).

The variants: the GEMM kernel (codegen/gemm.py: its small-M, GEMV and
packed paths, the epilogue in its store) and numpy's matmul (its BLAS, then
the epilogue's own pass).  Which is faster depends on the CPU and the shape,
so nothing is assumed:

1. Calibration (`calibrate`, seconds): both variants are timed on this host
   at a grid of shapes (M from 1 to 1024, four (K, N) pairs), each run
   reading its B from memory as a program's weights come, the least of a
   few runs; the table is kept in the persistent cache under a key made of
   the CPU's name and features, the dtype and shapejit's build, so a new CPU
   (or SHAPEJIT_ISA forcing a narrower one) is calibrated again.
2. Cost model (`predict`): a variant's time at any (M, N, K) is the FLOPs
   over the throughput calibrated at the nearest grid shape (in log space)
   whose B's rows alias in L1 as this one's do (the kernel packs such a B
   where it streams another: shapes/kernelargs.py), corrected for the
   padding waste of the kernel's column strips and for the balance of its
   strips over the cores, both as at the grid shape and as at this one.
3. Votes and a tree (`learn`): the model votes for the faster variant at
   shapes sampled across the range (numpy's by gemmchoice's margin: alone,
   BLAS looks faster than it is next to our kernels); a small decision tree
   over M, N, K and whether B's rows alias, learned from the votes (CART,
   Gini, fixed order of features and thresholds: deterministic for a given
   calibration) becomes Python source (`source`), compiled once: a few
   comparisons per new shape class.

A CPU without a calibration is calibrated in a background process of its
own (under SCHED_IDLE, once for all the processes on the machine:
jit/compile.py); until its tree arrives the runtime races both variants on
the first product of each shape class (runtime/gemmchoice.py).  `python -m
jit calibrate` makes one in the foreground.
"""
from __future__ import annotations

import itertools
import json
import math
import resource
import time
from dataclasses import dataclass

import numpy as np

from shapes import config, host
from shapes.kernelargs import rows_alias

VERSION = 4  # (3: votes within TIE go to the kernel; 4: TIE 1.12)
# background calibrations of this process: started, installed (its own or
# another process's), failed (shapejit_gemm_calibrations{outcome})
EVENTS = {"started": 0, "installed": 0, "failed": 0}
# (M: the kernel's single row tiles 1, 2, 4, 6 and the two-tile 3 and 12
# among the powers of two; (K, N): B's rows aliasing or not, K deep or not)
GRID_M = (1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128, 256, 512, 1024)
GRID_KN = ((768, 768), (768, 3072), (3072, 768), (768, 2304))
DEEPEST_K = max(k for k, _ in GRID_KN)  # (a deeper product is not the tree's to decide: runtime/gemmchoice.py)
FEWEST_N = min(n for _, n in GRID_KN)  # (nor is one of fewer columns' class)
ROUNDS = 3
SETTLE = 0.25  # seconds between the two variants' runs: the kernel pool's threads go to sleep
SAMPLE_M = tuple(sorted({int(round(2 ** (e / 2))) for e in range(0, 23)}))  # 1 .. 2048, two a power of 2
SAMPLE_KN = tuple(sorted({2 ** e for e in range(6, 14)} | {3 * 2 ** e for e in range(5, 12)}))  # 64 .. 8192
# (a leaf covers at least 16 of the ~5000 samples, a few (N, K) at one M:
# no split on one grid shape's noise.)  `python -m bench.gemm_sweep --cold`
# (66 cells, AMD EPYC znver3, no AVX-512): at 68fc668 (depth 4, leaves of
# 32, three features, M in powers of two, three (K, N)) 64 cells at 0.95x
# numpy or better, worst 0.87x, 61 within 10% of the best variant; with the
# aliasing feature, the grid's 3, 6, 12 rows and (768, 2304), depth 4: 65,
# worst 0.90x (8 rows whose B aliases: the kernel where BLAS was 1.2x
# faster), 62; depth 6 with leaves of 16: 66, worst 0.99x, 61 (each after a
# calibration of its own: a calibration's times at one shape vary up to 2x
# from one to the next, 12 rows at (768, 768) 0.17 and 0.35 ms).
DEPTH, MIN_LEAF = 6, 16


@dataclass(frozen=True)
class Calibration:
    cpu: str            # the CPU description it was measured on (name, features, forced ISA)
    dtype: str          # numpy dtype char
    nr: int             # the kernel's column strip (its padding unit)
    threads: int        # cores the kernel was split over
    times: tuple        # (M, K, N, kernel seconds, BLAS seconds) per grid shape

    def to_json(self) -> dict:
        return {"version": VERSION, "cpu": self.cpu, "dtype": self.dtype, "nr": self.nr, "threads": self.threads,
                "times": [list(t) for t in self.times]}

    @staticmethod
    def from_json(d: dict) -> "Calibration":
        if d.get("version") != VERSION:
            raise ValueError("calibration of another version")
        return Calibration(str(d["cpu"]), str(d["dtype"]), int(d["nr"]), int(d["threads"]),
                           tuple((int(m), int(k), int(n), float(tk), float(tb)) for m, k, n, tk, tb in d["times"]))


class Disturbed(RuntimeError):
    """The machine was too busy to calibrate: no calibration is kept."""


def calibrate(dtype, kernel, cpu: str, nr: int, threads: int, grid_m=GRID_M, grid_kn=GRID_KN,
              rounds: int = ROUNDS) -> Calibration:
    """Time `kernel(a, b, c)` (the GEMM into c) and numpy's matmul at every
    grid shape, each run reading another copy of B (from memory, not cache:
    `cold_copies`): the least of `rounds` passes over the grid, each pass the
    kernel at every shape, then numpy's at every shape (each variant alone,
    SETTLE apart: our pool's threads wait busily for a while after a
    product).  Passes, not runs in a row: a stall of the machine for a
    second or two (seen: numpy's product at 84 ms for a whole row of shapes
    that take 2-10) spoils one pass, not the least of them.  A time counts
    only from a run no other process interrupted (`_time`); while some
    shape has none for a variant, up to EXTRA_PASSES more passes run, and
    if more than DISTURBED_SHARE of the shapes still have none, it raises
    Disturbed (unless SHAPEJIT_CALIBRATE_BUSY): a tree learned from such
    times is kept for good (once per CPU), and one taken, it seems, while
    the test suite ran sent whole ranges to the slower variant."""
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    shapes = []
    for k, n in grid_kn:
        b = rng.standard_normal((k, n)).astype(dt)
        bs = itertools.cycle([b] + [b.copy() for _ in range(cold_copies(b.nbytes) - 1)])
        for m in grid_m:
            shapes.append((m, k, n, rng.standard_normal((m, k)).astype(dt), bs, np.empty((m, n), dt)))
    best = {variant: [math.inf] * len(shapes) for variant in ("kernel", "blas")}
    clean = {variant: [False] * len(shapes) for variant in best}
    runs = {"kernel": kernel, "blas": lambda a, b, c: np.matmul(a, b, out=c)}
    for done in range(rounds + EXTRA_PASSES):
        if done >= rounds and all(all(c) for c in clean.values()):
            break
        for variant, run in runs.items():
            time.sleep(SETTLE)
            for i, (_, _, _, a, bs, c) in enumerate(shapes):
                t, ok = _time(lambda: run(a, next(bs), c))
                if ok and not clean[variant][i]:  # (a clean time replaces every disturbed one)
                    best[variant][i], clean[variant][i] = t, True
                elif ok or not clean[variant][i]:
                    best[variant][i] = min(best[variant][i], t)
    disturbed = sum(not (ck and cb) for ck, cb in zip(clean["kernel"], clean["blas"]))
    if disturbed > DISTURBED_SHARE * len(shapes) and not config.get("SHAPEJIT_CALIBRATE_BUSY"):
        raise Disturbed(f"the machine was too busy to calibrate: {disturbed} of {len(shapes)} shapes have no run "
                        f"that another process left alone in {rounds + EXTRA_PASSES} passes")
    return Calibration(cpu, dt.char, nr, threads,
                       tuple((m, k, n, tk, tb) for (m, k, n, *_), tk, tb in zip(shapes, best["kernel"], best["blas"])))


def cold_copies(nbytes: int) -> int:
    """Copies of a B of `nbytes` a calibration takes in turns, so that each
    run reads its B from memory, as a program's weights come between two
    uses of one (the other layers' weights pass through the cache
    meanwhile): together twice the last-level cache.  Calibrated hot, the
    same B over and over, the tree sent GPT-2's 8-row products to the
    kernel, and the model ran at 0.86x numpy at T=8 on an AMD EPYC znver3
    (no AVX-512); calibrated from memory (the kernel at 0.76-0.83x numpy's
    speed at 8 rows for (K, N) = (768, 3072) and (3072, 768)) the wide ones
    go to BLAS, and it ran at 1.17x (`python -m bench --models`, `python -m
    jit calibrate`)."""
    return min(MAX_COPIES, max(2, -(-2 * host.last_level_cache_bytes() // max(1, nbytes))))


MAX_COPIES = 1024  # (bounds the count for a B far smaller than any of the grid: a test's)


PREEMPTED_RETRIES = 4
EXTRA_PASSES = 3
DISTURBED_SHARE = 0.1


def _time(run) -> tuple[float, bool]:
    """(seconds of one run after a warm-up, whether no thread of this process
    lost its core meanwhile): a run during which one did (an involuntary
    context switch: to another process -- a background calibration yields
    to everything -- or to another of our threads) is run again, a few
    times at most."""
    run()
    for _ in range(PREEMPTED_RETRIES):
        switches = resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
        t0 = time.perf_counter()
        run()
        t = time.perf_counter() - t0
        if resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw == switches:
            return t, True
    return t, False


def _balance(n: int, nr: int, threads: int) -> float:
    """The share of the cores the kernel's column strips keep busy."""
    units = -(-n // nr)
    return units / (threads * -(-units // threads))


def _waste(n: int, nr: int) -> float:
    """Columns computed per column wanted (the last strip is padded)."""
    return (-(-n // nr) * nr) / n


def aliases(cal: Calibration, n: int) -> bool:
    """Whether a C-contiguous B of n columns of the calibration's dtype has
    rows that alias in L1 (the kernel then packs it where it would stream)."""
    return rows_alias(n, np.dtype(cal.dtype).itemsize)


def predict(cal: Calibration, m: int, n: int, k: int) -> tuple[float, float]:
    """(kernel seconds, BLAS seconds) the model expects for an (m x k) @ (k x n)
    product, from the nearest grid shape (in log space) whose B's rows alias
    as this one's do, where the grid has one."""
    alias = aliases(cal, n)
    alike = [t for t in cal.times if aliases(cal, t[2]) == alias] or list(cal.times)

    def dist(t):
        return sum((math.log2(x) - math.log2(y)) ** 2 for x, y in ((t[0], m), (t[1], k), (t[2], n)))
    gm, gk, gn, tk, tb = min(alike, key=lambda t: (dist(t), t[:3]))
    flops, gflops = m * n * k, gm * gn * gk
    kernel_eff = lambda n_: _balance(n_, cal.nr, cal.threads) / _waste(n_, cal.nr)  # noqa: E731
    t_kernel = tk * flops / gflops * kernel_eff(gn) / kernel_eff(n)
    return t_kernel, tb * flops / gflops


@dataclass(frozen=True)
class Tree:
    """A node: `leaf` (True: numpy's matmul) or a test `feature` (0: M, 1: N,
    2: K, 3: B's rows alias, 0 or 1) <= `threshold`, then `low`, else `high`."""
    leaf: bool | None = None
    feature: int = -1
    threshold: int = 0
    low: "Tree | None" = None
    high: "Tree | None" = None

    def __call__(self, m: int, n: int, k: int, alias: int = 0) -> bool:
        node, x = self, (m, n, k, int(alias))
        while node.leaf is None:
            node = node.low if x[node.feature] <= node.threshold else node.high
        return node.leaf


FEATURES = ("M", "N", "K", "B's rows alias")


def tree_to_json(t: Tree):
    return t.leaf if t.leaf is not None else [t.feature, t.threshold, tree_to_json(t.low), tree_to_json(t.high)]


def tree_from_json(x) -> Tree:
    if isinstance(x, bool):
        return Tree(leaf=x)
    f, t, lo, hi = x
    if f not in range(len(FEATURES)) or type(t) is not int:
        raise ValueError("not a dispatch tree")
    return Tree(feature=f, threshold=t, low=tree_from_json(lo), high=tree_from_json(hi))


def record(cal: Calibration, tree: Tree) -> bytes:
    """What the persistent cache keeps: the calibration and the tree learned from it."""
    return json.dumps({"calibration": cal.to_json(), "tree": tree_to_json(tree)}, sort_keys=True).encode()


def from_record(blob: bytes) -> tuple[Calibration, Tree]:
    d = json.loads(blob)
    return Calibration.from_json(d["calibration"]), tree_from_json(d["tree"])


# A vote within TIE of a tie goes to the kernel: numpy's matmul wins a
# sampled shape only when the model has it faster by the margin times TIE.
# Calibrated times that close are noise (one grid shape's time varies up to
# 2x from one calibration to the next), and the tree followed them: on an
# AMD EPYC znver4 (AVX-512) a calibration had numpy's matmul at 1.01-1.02x
# the kernel's speed at 32 rows for (768, 768) and (768, 2304), its tree sent
# products of 17 to 45 rows of N <= 2048 to BLAS, and in `python -m
# bench.gemm_sweep --cold` those cells (24 and 32 rows, N = 768) ran at
# 0.97-1.06x numpy where the kernel (the epilogue a pass of its own) ran at
# 1.02-1.20x: 3 of the sweep's 5 cells more than 10% from the best variant.
# On an Intel Xeon (emeraldrapids, AVX-512) a calibration had numpy's matmul
# at 1.05-1.11x the kernel's speed past 362 rows for K = 768, its tree sent
# them to BLAS, and the BERT layer at B=8, S=384 (3072 rows) took 260-374 ms
# against 205-227 ms with the tree of a calibration under a tie of 12%,
# which keeps them on the kernel (a /tmp script, the two interleaved, two
# runs each): alone, the two are that close (`python -m bench.gemm_sweep`
# there: BLAS 1.52-2.21x numpy, the kernel 1.59-2.10x at M = 384-2048); in
# the model the kernel wins.  So a tie is anything within 12%.
TIE = 1.12


def votes(cal: Calibration, margin: float) -> list[tuple[tuple, bool]]:
    """((M, N, K, B's rows alias), BLAS faster) at every sampled shape, by
    the cost model: numpy's matmul wins when it is faster by the margin
    (and by TIE: a closer call is a tie, and the kernel takes it)."""
    out = []
    for m in SAMPLE_M:
        for n in SAMPLE_KN:
            for k in SAMPLE_KN:
                tk, tb = predict(cal, m, n, k)
                out.append(((m, n, k, int(aliases(cal, n))), margin * TIE * tb < tk))
    return out


def learn(samples: list[tuple[tuple, bool]], depth: int = DEPTH, min_leaf: int = MIN_LEAF) -> Tree:
    """CART over (M, N, K, B's rows alias): the split of least weighted Gini impurity, the
    features in order and thresholds ascending (the first best wins), until
    `depth` or a pure node or leaves under `min_leaf` samples; a leaf votes
    the majority (the kernel on a tie)."""
    blas = sum(v for _, v in samples)
    if depth == 0 or blas in (0, len(samples)) or len(samples) < 2 * min_leaf:
        return Tree(leaf=2 * blas > len(samples))
    best = None
    for f in range(len(FEATURES)):
        for t in sorted({x[f] for x, _ in samples})[:-1]:
            low = [s for s in samples if s[0][f] <= t]
            high = [s for s in samples if s[0][f] > t]
            if len(low) < min_leaf or len(high) < min_leaf:
                continue
            score = _gini(low) * len(low) + _gini(high) * len(high)
            if best is None or score < best[0] - 1e-12:
                best = score, f, t, low, high
    if best is None or best[0] >= _gini(samples) * len(samples) - 1e-12:
        return Tree(leaf=2 * blas > len(samples))
    _, f, t, low, high = best
    lo, hi = learn(low, depth - 1, min_leaf), learn(high, depth - 1, min_leaf)
    if lo.leaf is not None and lo.leaf == hi.leaf:
        return Tree(leaf=lo.leaf)
    return Tree(feature=f, threshold=t, low=lo, high=hi)


def _gini(samples) -> float:
    p = sum(v for _, v in samples) / len(samples)
    return 2 * p * (1 - p)


def _text(tree: Tree, leaf, low, high, step: str) -> list[str]:
    """The tree as nested lines: leaf(its value) at a leaf, low(node) before
    a test's low branch and high(node) before its high one, `step` deeper."""
    out = []

    def walk(node: Tree, indent: str) -> None:
        if node.leaf is not None:
            out.append(indent + leaf(node.leaf))
            return
        out.append(indent + low(node))
        walk(node.low, indent + step)
        out.append(indent + high(node))
        walk(node.high, indent + step)
    walk(tree, "")
    return out


def source(tree: Tree, name: str = "choose") -> str:
    """The tree as a Python function of (m, n, k, a): True for numpy's matmul
    (a: whether B's rows alias, 0 or 1)."""
    body = _text(tree, lambda v: f"return {v}", lambda n: f"if {'mnka'[n.feature]} <= {n.threshold}:",
                 lambda n: "else:", "    ")
    return "\n".join([f"def {name}(m, n, k, a=0):"] + ["    " + x for x in body]) + "\n"


def compile_tree(tree: Tree):
    """The generated dispatch function (source() compiled: our own text, of
    ints and comparisons, never a user's)."""
    ns: dict = {}
    exec(compile(source(tree), "<shapejit gemm dispatch>", "exec"), ns)
    return ns["choose"]


def describe(tree: Tree) -> list[str]:
    """The tree as explain() prints it."""
    def test(n: Tree, low: bool) -> str:
        if n.feature == 3:  # (a flag: its threshold is 0)
            return "B's rows do not alias:" if low else "B's rows alias:"
        return f"{FEATURES[n.feature]} {'<=' if low else '>'} {n.threshold}:"
    return _text(tree, lambda v: "-> " + ("numpy matmul (BLAS)" if v else "GEMM kernel"),
                 lambda n: test(n, True), lambda n: test(n, False), "  ")

"""python -m bench.reductions [--rounds 7] [--only WORD,..]: reductions over
rows, columns and dims of size 1, argmax/argmin (over the last axis and
over others), and pools through a reshape (reductions over axes of two
runs), jitted (one compile per program serves every shape) against numpy, float32, their calls interleaved in turns
(bench.harness.in_turns: the machine's drift falls on both alike).  Prints
numpy's time over shapejit's for each program and shape (above 1: shapejit
is faster).  Issue 12 asks whether a row and column reduction's work split
(rows per task, columns per block) should be chosen per shape: this is what
the split of codegen/schedule.py (a row a task; COLUMN_BLOCK columns a
task) gives.  `--column-blocks 64,1024,2048`: x.sum(axis=0) instead, with
the kernel built for each COLUMN_BLOCK (columns a task) in turn, all of
them and numpy interleaved.  `--only leading,middle,pools`: the sections
whose title holds one of the words.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from bench import harness
from bench.report import cpu_description
from codegen import schedule
from jit import jit

ROW_SHAPES = ((1, 4_000_000), (16, 250_000), (1000, 4000), (100_000, 40), (1_000_000, 4))
COLUMN_SHAPES = ((1000, 4000), (16, 250_000), (20_000, 2000), (100_000, 400), (100_000, 96), (4000, 96),
                 (300, 300), (100, 768), (1_000_000, 3))
UNIT_SHAPES = ((4_000_000, 1),)
ARG_SHAPES = ((1000, 4000), (8, 50_000), (100_000, 10))
LEADING_ARG_SHAPES = ((2000, 3000), (64, 100), (100_000, 16))
MIDDLE_SHAPES = ((16, 512, 256),)
POOL_SHAPES = ((32, 64, 64, 64),)


def row_sum(x):
    return x.sum(axis=-1)


def row_max_of_squares(x):
    return (x * x).max(axis=-1)


def column_sum(x):
    return x.sum(axis=0)


def column_sum_of_exp(x):
    return np.exp(x).sum(axis=0)


def column_var(x):
    return x.var(axis=0)


def plus_one(x):
    return x * 2 + 1


def nearest(x, y):
    return ((x - y) ** 2).argmin(axis=1)


def softmax_argmax(x, y):
    return np.exp(x - x.max(axis=1, keepdims=True)).argmax(axis=1)


def argmax_alone(x, y):
    return x.argmax(axis=1)


def argmax_columns(x, y):
    return x.argmax(axis=0)


def argmin_columns_of_difference(x, y):
    return (x - y).argmin(axis=0)


def argmax_middle_axis(x):
    return x.argmax(axis=1)


def _pairs(x):  # (2x2 windows of NCHW images: axes 3 and 5 of a reshape)
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2)


def max_pool(x):
    return _pairs(x).max(axis=(3, 5))


def mean_pool(x):
    return _pairs(x).mean(axis=(3, 5))


CASES = (
    ("rows", (row_sum, row_max_of_squares), ROW_SHAPES, 1),
    ("columns", (column_sum, column_sum_of_exp, column_var), COLUMN_SHAPES, 1),
    ("size-1 dims", (row_sum, column_sum, plus_one), UNIT_SHAPES, 1),
    ("argmax/argmin", (nearest, softmax_argmax, argmax_alone), ARG_SHAPES, 2),
    ("argmax/argmin over a leading axis", (argmax_columns, argmin_columns_of_difference), LEADING_ARG_SHAPES, 2),
    ("argmax over a middle axis", (argmax_middle_axis,), MIDDLE_SHAPES, 1),
    ("pools (axes of two runs)", (max_pool, mean_pool), POOL_SHAPES, 1),
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reductions")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--column-blocks", default="", help="COLUMN_BLOCK values to compare on column sums")
    ap.add_argument("--only", default="", help="comma-separated words: the sections whose title holds one")
    a = ap.parse_args(argv)
    if a.column_blocks:
        return column_blocks([int(v) for v in a.column_blocks.split(",")], a.rounds)
    print(f"# reductions, numpy time / shapejit time ({cpu_description()}); float32, median over {a.rounds} rounds")
    rng = np.random.default_rng(0)
    words = [w for w in a.only.split(",") if w]
    for title, programs, shapes, arity in CASES:
        if words and not any(w in title for w in words):
            continue
        print(f"\n{title}:")
        print(f"| shape | " + " | ".join(p.__name__ for p in programs) + " |")
        print("|---|" + "--:|" * len(programs))
        jitted = [jit(p) for p in programs]
        for shape in shapes:
            args = tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(arity))
            cells = []
            for p, f in zip(programs, jitted):
                f(*args)  # (a first call returns its trace's numpy values: the kernel's are the next call's)
                want, got = p(*args), f(*args)
                assert got.dtype == want.dtype and got.shape == want.shape, p.__name__
                if want.dtype.kind == "f":
                    np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-2 * float(np.abs(args[0]).max()))
                else:
                    np.testing.assert_array_equal(got, want)
                t = harness.in_turns([lambda p=p: p(*args), lambda f=f: f(*args)], a.rounds, warm=0.05, turn=0.05)
                cells.append(f"{t[0] / t[1]:.2f}")
            print(f"| {shape} | " + " | ".join(cells) + " |", flush=True)
    return 0


def column_blocks(blocks: list[int], rounds: int) -> int:
    """x.sum(axis=0) on kernels built with each COLUMN_BLOCK, against numpy."""
    os.environ["SHAPEJIT_TRACE_CACHE"] = "0"  # (a saved trace would carry the first build's blocks)
    print(f"# x.sum(axis=0), numpy time / shapejit time, COLUMN_BLOCK = {blocks} "
          f"({cpu_description()}); float32, median over {rounds} rounds")
    print("| shape | " + " | ".join(map(str, blocks)) + " |")
    print("|---|" + "--:|" * len(blocks))
    rng = np.random.default_rng(0)
    default = schedule.COLUMN_BLOCK
    try:
        for shape in COLUMN_SHAPES:
            x = rng.standard_normal(shape).astype(np.float32)
            fs = []
            for block in blocks:  # (a build of its own: the block is in its code, the cache's key)
                schedule.COLUMN_BLOCK = block
                f = jit(lambda x: x.sum(axis=0))
                f(x)  # (the trace's values; the kernel's are the next call's)
                np.testing.assert_allclose(f(x), column_sum(x), rtol=1e-3, atol=1e-2)
                fs.append(f)
            t = harness.in_turns([lambda: column_sum(x)] + [lambda f=f: f(x) for f in fs], rounds,
                                 warm=0.05, turn=0.05)
            print(f"| {shape} | " + " | ".join(f"{t[0] / ti:.2f}" for ti in t[1:]) + " |", flush=True)
    finally:
        schedule.COLUMN_BLOCK = default
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""python -m bench.programs [--rounds 7]: programs people write whose
speed README and the session notes quote, each timed against the way it
runs without shapejit (numpy's, or plain Python's), calls interleaved in
turns (bench.harness.in_turns), medians of the rounds:

- a scalar Kalman filter whose loop updates its state on `self` (lifted
  whole: against its Python run);
- the sieve of Eratosthenes, `is_p[i * i::i] = False` in a loop (lifted);
- a GRU over a sequence, storing each state (`hs[t] = h`: a scan);
- column sums and means of a Fortran-ordered array (the column kernel's
  pairwise sums, numpy's order);
- successive over-relaxation, `A[i] @ x` per row (the row loop lifted);
- np.fill_diagonal of a copy (numpy's update into the array the call made).

Prints the CPU (bench.report.cpu_description) and, per program, both
times and their ratio (above 1: shapejit faster).
"""
from __future__ import annotations

import argparse

import numpy as np

from bench import harness
from bench.report import cpu_description
from jit import jit


class Kalman:
    """A scalar Kalman filter as written in plain numpy: its state on self,
    updated in a loop over the measurements."""

    def __init__(self, q=1e-3, r=0.1):
        self.x, self.p, self.q, self.r = 0.0, 1.0, q, r

    def run(self, zs):
        out = np.empty(zs.shape[0])
        for i in range(zs.shape[0]):
            self.p = self.p + self.q
            k = self.p / (self.p + self.r)
            self.x = self.x + k * (zs[i] - self.x)
            self.p = (1 - k) * self.p
            out[i] = self.x
        return out


def sieve(n):
    is_p = np.ones(n + 1, dtype=bool)
    is_p[:2] = False
    for i in range(2, int(n ** 0.5) + 1):
        if is_p[i]:
            is_p[i * i::i] = False
    return np.flatnonzero(is_p)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru(xs, W, U, b):
    T, B, D = xs.shape
    Hd = U.shape[0]
    h = np.zeros((B, Hd), dtype=xs.dtype)
    hs = np.empty((T, B, Hd), dtype=xs.dtype)
    for t in range(T):
        xw = xs[t] @ W + b
        hu = h @ U[:, :2 * Hd]
        r = _sigmoid(xw[:, :Hd] + hu[:, :Hd])
        zg = _sigmoid(xw[:, Hd:2 * Hd] + hu[:, Hd:])
        n = np.tanh(xw[:, 2 * Hd:] + (r * h) @ U[:, 2 * Hd:])
        h = (1 - zg) * n + zg * h
        hs[t] = h
    return hs


def column_stats(x):
    return x.sum(axis=0), x.mean(axis=0)


def sor(A, b, w, sweeps):
    x = np.zeros_like(b)
    for _ in range(sweeps):
        for i in range(A.shape[0]):
            sigma = A[i] @ x - A[i, i] * x[i]
            x[i] = (1 - w) * x[i] + w * (b[i] - sigma) / A[i, i]
    return x


def zero_diagonal(A):
    B = A.copy()
    np.fill_diagonal(B, 0.0)
    return B


def _cases(rng):
    """(name, plain call, jitted call, warm-up sizes' calls) per program."""
    kalman_run = jit(Kalman.run)
    zs = rng.standard_normal(2000)
    plain_k, jit_k = Kalman(), Kalman()
    jit_sieve = jit(sieve)
    W, U, b = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((32, 96), (32, 96), (96,)))
    xs = rng.standard_normal((50, 16, 32)).astype(np.float32)
    jit_gru = jit(gru)
    cols = np.asfortranarray(rng.standard_normal((100000, 64)).astype(np.float32))
    jit_cols = jit(column_stats)
    jit_sor, jit_zero = jit(sor), jit(zero_diagonal)
    sor_args = [(rng.standard_normal((n, n)) + n * np.eye(n), rng.standard_normal(n), 1.2, 15) for n in (6, 50)]
    square = rng.standard_normal((1000, 1000))
    warm = [lambda: [kalman_run(jit_k, rng.standard_normal(m)) for m in (50, 60, 70)],
            lambda: [jit_sieve(m) for m in (1000, 1100, 1200)],
            lambda: [jit_gru(rng.standard_normal((m, 16, 32)).astype(np.float32), W, U, b) for m in (3, 5, 8)],
            lambda: [jit_cols(np.asfortranarray(rng.standard_normal((m, 64)).astype(np.float32)))
                     for m in (10, 20, 30)],
            lambda: [jit_sor(*a) for a in sor_args],
            lambda: jit_zero(square)]
    return [("Kalman filter, 2000 measurements (Python)", lambda: plain_k.run(zs), lambda: kalman_run(jit_k, zs),
             warm[0]),
            ("sieve, n = 10^6", lambda: sieve(10 ** 6), lambda: jit_sieve(10 ** 6), warm[1]),
            ("GRU, T = 50, B = 16, H = 32, float32", lambda: gru(xs, W, U, b), lambda: jit_gru(xs, W, U, b),
             warm[2]),
            ("column sum and mean, F-ordered 100000 x 64 float32", lambda: column_stats(cols),
             lambda: jit_cols(cols), warm[3])] + [
            (f"SOR, n = {a[0].shape[0]}, 15 sweeps", (lambda a=a: sor(*a)), (lambda a=a: jit_sor(*a)), warm[4])
            for a in sor_args] + [
            ("np.fill_diagonal of a copy, 1000 x 1000", lambda: zero_diagonal(square), lambda: jit_zero(square),
             warm[5])]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args(argv)
    print(f"{cpu_description()}; medians of {a.rounds} rounds of interleaved turns")
    print("| program | without shapejit | shapejit | ratio |\n|---|--:|--:|--:|")
    for name, plain, jitted, warm in _cases(np.random.default_rng(0)):
        warm()  # (the sizes that make the loops symbolic: the timed call is served by that entry)
        t_plain, t_jit = harness.in_turns([plain, jitted], a.rounds)
        print(f"| {name} | {t_plain * 1e6:.0f} us | {t_jit * 1e6:.0f} us | {t_plain / t_jit:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

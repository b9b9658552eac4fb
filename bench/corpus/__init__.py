"""A corpus of real-world numpy kernels modelled on NPBench (spcl/npbench),
written here as plain numpy: each is a module-level function (for `jit(fn)`
and `numba.njit(fn)`), with input makers for three presets and the list of
arguments it writes into.

Presets: "T" (tiny: a few elements per dim, for tests), "S" and "M" (NPBench's
sizes).  Inputs are made the way NPBench makes them (same formulas or the same
kind of random data); scalars NPBench passes as Python ints stay Python ints,
its numpy scalars (`np.float64(1.5)`) stay numpy scalars.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

PRESETS = ("T", "S", "M")


@dataclass(frozen=True)
class Kernel:
    name: str
    fn: Callable
    sizes: dict            # preset -> keyword arguments of `init`
    init: Callable         # init(rng, **sizes) -> tuple of arguments
    mutates: tuple = ()    # indices of the arguments the kernel writes into
    family: str = ""
    rtol: dict | None = None    # preset -> rtol wider than `tolerance`, where rounding is amplified
                                # (inf: chaotic there, only types, dtypes and shapes are compared)

    def rtol_for(self, preset: str) -> float | None:
        return (self.rtol or {}).get(preset)

    def make_inputs(self, preset: str, rng: np.random.Generator) -> tuple:
        return tuple(self.init(rng, **self.sizes[preset]))

    def outputs(self, args, result) -> tuple:
        """What to compare: the return value, then every mutated argument."""
        return (result,) + tuple(args[i] for i in self.mutates)

    def output_names(self) -> tuple:
        import inspect
        params = list(inspect.signature(self.fn).parameters)
        return ("return",) + tuple(params[i] for i in self.mutates)


def kernel(name, fn, init, sizes, mutates=(), family="", rtol=None) -> Kernel:
    missing = set(PRESETS) - set(sizes)
    assert not missing, f"{name}: no sizes for presets {missing}"
    return Kernel(name, fn, sizes, init, tuple(mutates), family, rtol)


def fresh(args: tuple) -> tuple:
    """A copy of the arguments a kernel may write into (arrays are copied,
    scalars are immutable)."""
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


# ----------------------------------------------------------- comparison

def tolerance(dtype) -> float:
    """Relative tolerance: float32 (and complex64) 1e-5, wider floats 1e-9."""
    return 1e-5 if np.dtype(dtype).itemsize <= 4 or np.dtype(dtype) == np.complex64 else 1e-9


def compare(got, want, path: str = "result", rtol: float | None = None) -> str | None:
    """None when `got` equals numpy's `want` (same structure, types, dtypes
    and shapes; floats to `rtol` (default `tolerance`), ints and bools
    exactly), else why not."""
    if isinstance(want, (tuple, list)):
        if type(got) is not type(want) or len(got) != len(want):
            return f"{path}: {type(got).__name__} of {_len(got)} != numpy's {type(want).__name__} of {len(want)}"
        for k, (g, w) in enumerate(zip(got, want)):
            why = compare(g, w, f"{path}[{k}]", rtol)
            if why:
                return why
        return None
    if want is None or isinstance(want, (str, bytes)):
        return None if got == want else f"{path}: {got!r} != numpy's {want!r}"
    if isinstance(want, np.ndarray) and not isinstance(got, np.ndarray):
        return f"{path}: {type(got).__name__} != numpy's ndarray"
    if isinstance(want, np.generic) and not isinstance(got, np.generic):
        return f"{path}: {type(got).__name__} != numpy's {type(want).__name__}"
    if not isinstance(want, (np.ndarray, np.generic)) and not isinstance(got, (int, float, complex, np.generic)):
        return f"{path}: {type(got).__name__} != numpy's {type(want).__name__}"
    g, w = np.asarray(got), np.asarray(want)
    if isinstance(want, (np.ndarray, np.generic)):
        if g.dtype != w.dtype:
            return f"{path}: dtype {g.dtype} != numpy's {w.dtype}"
        if g.shape != w.shape:
            return f"{path}: shape {g.shape} != numpy's {w.shape}"
    if w.dtype.kind in "fc":
        if rtol == float("inf"):
            return None
        rtol = max(rtol or 0.0, tolerance(w.dtype))
        finite = np.abs(w[np.isfinite(w)]) if w.size else w
        atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True):
            bad = ~np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
            k = np.unravel_index(np.argmax(bad), bad.shape) if bad.ndim else ()
            return (f"{path}: {int(bad.sum())} of {bad.size} values differ, e.g. at {tuple(map(int, k))} "
                    f"{g[k]!r} vs numpy's {w[k]!r}")
        return None
    if g.shape != w.shape or not np.array_equal(g, w):
        return f"{path}: values differ from numpy's"
    return None


def _len(x):
    try:
        return len(x)
    except TypeError:
        return "-"


# ------------------------------------------------------------- registry

from bench.corpus import dl, discrete, linalg, physics, spectral, stencils  # noqa: E402

KERNELS: list[Kernel] = [*linalg.KERNELS, *stencils.KERNELS, *physics.KERNELS,
                         *spectral.KERNELS, *discrete.KERNELS, *dl.KERNELS]
BY_NAME: dict[str, Kernel] = {k.name: k for k in KERNELS}
assert len(BY_NAME) == len(KERNELS), "duplicate kernel names"

# Kernels that shapejit compiles whole today (llvm back end, preset T: no eager
# node, no graph break, no fallback, no eager call); tests/test_corpus.py keeps it that way.
FULLY_COMPILED: set[str] = {
    "gemm", "gemver", "gesummv", "atax", "bicg", "mvt", "k2mm", "k3mm", "doitgen", "syrk", "syr2k", "symm",
    "trmm", "trisolv", "cholesky", "cholesky2", "lu", "ludcmp", "durbin", "gramschmidt", "correlation",
    "covariance", "covariance2",
    "jacobi_1d", "jacobi_2d", "heat_3d", "fdtd_2d", "seidel_2d", "adi", "deriche", "hdiff", "vadv",
    "nbody", "cavity_flow", "channel_flow", "arc_distance", "go_fast", "compute", "azimint_naive", "azimint_hist",
    "stockham_fft", "scattering_self_energies", "mandelbrot1", "contour_integral", "crc16", "nussinov",
    "floyd_warshall", "spmv",
    "softmax", "mlp", "conv2d_bias", "lenet", "resnet",
}

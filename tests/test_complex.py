"""Complex numbers in fused kernels (codegen/complexval.py): numpy's formulas
on this CPU, so results equal numpy's bit for bit; runtime complex scalars
(Python's and numpy's); complex arrays a function creates are traced; writes
through .real/.imag are numpy's (a complex array of the new part and the
other); masked updates through one mask become a where; and an unrolled
chain longer than a kernel holds splits into several kernels."""
import warnings

import numpy as np
import pytest

from clustering.partition import MAX_KERNEL_NODES
from jit import JitWarning, jit
from tests.conftest import assert_like_numpy

C64, C128 = np.complex64, np.complex128


def _complex(rng, n, dtype, specials=True):
    z = (rng.standard_normal(n) * 3 + 1j * rng.standard_normal(n) * 3).astype(dtype)
    if specials:  # (numpy's rules for infinities, NaNs, zeros and overflow)
        z[:8] = [np.nan, np.inf, -np.inf * 1j, 1e30, 0, -0.0, complex(0, -0.0), complex(np.nan, 1)]
    return z


def _same_bits(got, want):
    """Equal dtypes, shapes and values (NaN where numpy has NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    both_nan = np.isnan(got) & np.isnan(want)
    assert np.all((got == want) | both_nan), f"{np.sum((got != want) & ~both_nan)} of {got.size} differ"


def _compiled(f) -> bool:
    return "kernel over" in f.explain()


PROGRAMS = {
    "product": lambda z, c: z * c,
    "square": lambda z, c: z ** 2 + np.square(c),
    "cube": lambda z, c: z ** 3,
    "quotient": lambda z, c: z / c - c,
    "by zero": lambda z, c: z / (c * 0),
    "magnitude": lambda z, c: np.abs(z) + np.abs(c * 2),
    "conjugate": lambda z, c: np.conj(z) * c,
    "parts": lambda z, c: z.real * c.imag - np.imag(z) + np.real(c),
    "where": lambda z, c: np.where(np.abs(z) < 2, z * z + c, z),
    "compare": lambda z, c: (z == c) | (z != z * 1) | np.isnan(z) | np.isinf(c) | ~np.isfinite(z),
    "with reals": lambda z, c: z * np.arange(z.shape[0]) + 2.5 - z.real * 1j,
    "to bool": lambda z, c: z.astype(bool) & c.astype(np.bool_),
    "chain": lambda z, c: ((z * z + c) * (z * z + c) + c) / (c + 1),
}


@pytest.mark.parametrize("dtype", [C64, C128])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_complex_kernels_equal_numpy_bit_for_bit(name, dtype):
    fn = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    f = jit(fn)
    for n in (3, 7, 1001, 4099):  # (one compile; vector bodies and their tails)
        z, c = _complex(rng, n, dtype, n > 8), _complex(rng, n, dtype, n > 8)
        with np.errstate(all="ignore"):
            f(z, c)
            _same_bits(f(z, c), fn(z, c))  # (the second call runs the kernel, not the trace)
    assert _compiled(f), f.explain()
    assert f.stats()["compiles"] == 1 and f.stats()["fallbacks"] == 0


@pytest.mark.parametrize("dtype", [C64, C128])
def test_strided_and_broadcast_complex_operands(dtype):
    def fn(z, c, row):
        return z[::3] * c[1::3] + row
    f = jit(fn)
    rng = np.random.default_rng(0)
    for rows in (4, 9):
        z, c = _complex(rng, rows * 30, dtype).reshape(rows, 30).T, _complex(rng, rows * 30, dtype).reshape(30, rows)
        row = _complex(rng, rows, dtype, False)
        with np.errstate(all="ignore"):
            f(z, c, row)
            _same_bits(f(z, c, row), fn(z, c, row))
    assert _compiled(f)


def test_complex_scalars_at_run_time_and_as_constants():
    def fn(z, s, t):
        return z * s + t - 1j
    f = jit(fn)
    z = _complex(np.random.default_rng(1), 100, C128, False)
    # Python complex numbers are runtime scalars, as floats are (two doubles to the kernel): one compile
    for s, t in ((2 + 1j, 1.5), (-3.5 + 0.25j, 0.0), (1e300j, -2.5), (complex(np.nan, 1), 1e-300)):
        with np.errstate(all="ignore"):
            f(z, s, t)
            _same_bits(f(z, s, t), fn(z, s, t))
    assert f.stats()["compiles"] == 1 and _compiled(f)
    # numpy's complex scalars too, one signature per dtype
    for s, t in ((np.complex128(2 - 1j), 1.5), (np.complex128(0.5j), 2.5), (np.complex64(1 - 1j), 3),
                 (np.complex128(0.5j), np.float32(2))):
        f(z, s, t)
        _same_bits(f(z, s, t), fn(z, s, t))
    z64 = z.astype(C64)
    g = jit(lambda z, s: z * s)
    for s in (1j, 2 - 0.5j):
        g(z64, s)
        _same_bits(g(z64, s), z64 * s)  # (a Python complex keeps complex64: NEP 50)
    assert g.stats()["compiles"] == 1


def test_bounds_checked_complex_kernel(monkeypatch):
    monkeypatch.setenv("SHAPEJIT_BOUNDS_CHECK", "1")
    fn = PROGRAMS["where"]
    f = jit(fn)
    z, c = _complex(np.random.default_rng(2), 513, C128), _complex(np.random.default_rng(3), 513, C128)
    with np.errstate(all="ignore"):
        f(z, c)
        _same_bits(f(z, c), fn(z, c))


def test_complex_arrays_the_function_creates_are_traced():
    def fn(x):
        w = np.zeros(x.shape, dtype=np.complex128)
        w[1:] = x[1:] * 1j
        w += np.ones_like(w) * (2 - 1j)
        return w
    f = jit(fn)
    x = np.linspace(-1, 1, 50)
    f(x)
    _same_bits(f(x), fn(x))
    assert f.stats()["fallbacks"] == 0 and f.stats()["eager_nodes"] == 0


def _build_from_parts(a, b):
    c = np.empty(a.shape, np.complex128)
    c.real = a
    c.imag = b * 2
    return c * 1j


def _swap_parts(z):
    z.imag = z.imag[::-1]
    z.real[1:3] = 7
    return np.abs(z)


@pytest.mark.parametrize("fn", [
    lambda z, w: (z.real.__setitem__(slice(None), 0), z * 2)[1],
    lambda z, w: (z.imag.__imul__(3), z + 1)[1],
    lambda z, w: _swap_parts(z),
    lambda z, w: _build_from_parts(z.real, w.imag),
], ids=["assign through .real", "in place through .imag", "set .imag, assign into .real", "built from parts"])
@pytest.mark.parametrize("dtype", [C64, C128])
def test_writes_through_real_and_imag_compile_as_numpy_writes(fn, dtype):
    rng = np.random.default_rng(6)
    f = jit(fn)
    for n in (5, 9):
        z, w = _complex(rng, n, dtype, False), _complex(rng, n, dtype, False)
        for _ in range(2):  # (traced, then compiled)
            a, b = z.copy(), z.copy()
            _same_bits(f(a, w), fn(b, w))
            _same_bits(a, b)  # (the caller's array written as numpy writes it)
    assert f.stats()["fallbacks"] == 0 and f.stats()["eager_nodes"] == 0 and _compiled(f)


def test_setting_imag_of_a_real_array_raises_numpys_error():
    def fn(x):
        x.imag = 1.0
        return x
    with pytest.raises(TypeError, match="imaginary part"):
        jit(fn)(np.arange(3.0))


def test_a_part_read_before_a_write_keeps_the_old_values():
    def fn(z):
        re = z.real
        z *= 2
        return re + np.imag(z)  # (numpy's .real is a view: it sees the write)
    z = np.arange(5) * (1 + 2j)
    f = jit(fn)
    a, b = z.copy(), z.copy()
    f(a)
    a, b = z.copy(), z.copy()
    _same_bits(f(a), fn(b))
    _same_bits(a, b)


def test_masked_update_through_one_mask_is_a_where():
    def fn(z, c):
        m = np.abs(z) < 2
        z[m] = z[m] * 0.5 + c[m]
        return z
    f = jit(fn)
    x = np.linspace(-3, 3, 40)
    for _ in range(2):
        a, b = x.copy(), x.copy()
        assert_like_numpy(f(a, x), fn(b, x))
        assert_like_numpy(a, b)
    assert f.stats()["eager_nodes"] == 0 and "where" in f.explain()
    with pytest.raises(IndexError, match="boolean index"):  # (numpy's error for a mask of another shape)
        f(x.copy(), np.zeros(5))
    assert_like_numpy(f(x.copy(), x), fn(x.copy(), x))  # (usable after the error)


def test_mandelbrot_iterations_equal_numpy_bit_for_bit():
    def mandelbrot(C, maxiter):
        N = np.zeros(C.shape, dtype=np.int64)
        Z = np.zeros(C.shape, dtype=np.complex128)
        for n in range(maxiter):
            inside = np.abs(Z) < 2.0
            N[inside] = n
            Z[inside] = Z[inside] ** 2 + C[inside]
        return Z, N
    X, Y = np.linspace(-1.75, 0.25, 60), np.linspace(-1.0, 1.0, 50)
    C = X + Y[:, None] * 1j
    f = jit(mandelbrot, static_argnames=("maxiter",))
    with np.errstate(all="ignore"):
        f(C, 40)
        (z, n), (zr, nr) = f(C, 40), mandelbrot(C, 40)
    _same_bits(z, zr)
    assert np.array_equal(n, nr)
    assert f.stats()["eager_nodes"] == 0 and f.stats()["fallbacks"] == 0
    # 40 iterations of ~8 ops: more than one kernel holds
    assert f.explain().count("kernel over") >= 2 and f"at most {MAX_KERNEL_NODES} ops" in f.explain()


def test_a_chain_longer_than_a_kernel_holds_compiles():
    def fn(x, k):
        for i in range(k):
            x = x * 0.5 + np.sin(x) * 0.25
        return x
    f = jit(fn, static_argnames=("k",))
    x = np.linspace(-2, 2, 1000)
    f(x, 3 * MAX_KERNEL_NODES)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        assert_like_numpy(f(x, 3 * MAX_KERNEL_NODES), fn(x, 3 * MAX_KERNEL_NODES), ulps=64)
    assert f.explain().count("kernel over") >= 3 and f.stats()["fallbacks"] == 0


@pytest.mark.parametrize("dtype", [C64, C128])
def test_complex_exp_as_c_cexp(dtype):
    def fn(z, x):
        return np.exp(z) + np.exp(1j * x)
    f = jit(fn)
    rng = np.random.default_rng(5)
    z = (rng.standard_normal(3001) * 4 + 1j * rng.standard_normal(3001) * 10).astype(dtype)
    big = 700.0 if dtype == C128 else 85.0
    z[:4] = [big + 1j, big + 15 + 2j, 3 * big + 0.5j, -big * 2 + 1j]  # (a real part past exp's range: scaled)
    x = np.linspace(-50, 50, 3001).astype(z.real.dtype)
    with np.errstate(all="ignore"):
        f(z, x)
        got, want = f(z, x), fn(z, x)
    assert got.dtype == want.dtype and _compiled(f)
    # our exp, cos and sin are a few ulp from the C library's (tests/test_mathlib.py)
    assert_like_numpy(got, want, ulps=16)
    # C's values for infinite and NaN parts, exactly
    inf, nan = np.inf, np.nan
    specials = np.array([complex(inf, 0), complex(inf, -0.0), complex(inf, 1), complex(inf, -2),
                         complex(-inf, 0), complex(-inf, 3), complex(-inf, -1), complex(inf, inf),
                         complex(-inf, inf), complex(inf, nan), complex(-inf, nan), complex(nan, 0),
                         complex(nan, 1), complex(1, inf), complex(1, nan), complex(0, -0.0),
                         complex(-0.0, 0)] * 2, dtype=dtype)
    g = jit(lambda z: np.exp(z))
    with np.errstate(all="ignore"):
        g(specials)
        got, want = g(specials), np.exp(specials)
    assert _compiled(g)
    for part in ("real", "imag"):
        a, b = getattr(got, part), getattr(want, part)
        assert np.array_equal(np.isnan(a), np.isnan(b)), (part, got, want)
        ok = ~np.isnan(b)
        assert np.array_equal(np.isinf(a[ok]), np.isinf(b[ok])) and np.array_equal(np.signbit(a[ok]), np.signbit(b[ok]))
        fin = ok & np.isfinite(b)
        assert np.all(np.abs(a[fin] - b[fin]) <= 16 * np.finfo(a.dtype).eps * np.abs(b[fin])), (part, got, want)


def _part_ulps(got, want):
    """The largest distance of a part from numpy's, in ulps of numpy's part
    (equal infinities and NaN where numpy has NaN count as 0)."""
    worst = 0.0
    for a, b in ((got.real, want.real), (got.imag, want.imag)):
        assert np.array_equal(np.isnan(a), np.isnan(b))
        ok = ~np.isnan(b)
        assert np.array_equal(np.isinf(a[ok]), np.isinf(b[ok]))
        same = (a == b) | np.isnan(b)
        with np.errstate(all="ignore"):
            d = np.abs(a - b) / np.spacing(np.abs(b))
        worst = max(worst, float(np.max(np.where(same, 0, d), initial=0.0)))
    return worst


@pytest.mark.parametrize("dtype", [C64, C128])
def test_complex_sqrt_and_log_as_c_csqrt_and_clog(dtype):
    """np.sqrt and np.log of complex arrays compile, a few ulp from the C
    library's (numpy's): over all magnitudes, on the unit circle (log's real
    part near 0), beside the axes, and C's values for zeros, infinities and
    NaNs."""
    rng = np.random.default_rng(11)
    n = 4000
    hi = 300 if dtype == C128 else 35
    angle = rng.uniform(0, 2 * np.pi, n)
    re = np.concatenate([rng.standard_normal(n) * 3, 10.0 ** rng.uniform(-hi, hi, n) * rng.choice([-1, 1], n),
                         np.cos(angle), 1 + rng.standard_normal(n) * 1e-6])
    im = np.concatenate([rng.standard_normal(n) * 3, 10.0 ** rng.uniform(-hi, hi, n) * rng.choice([-1, 1], n),
                         np.sin(angle), rng.standard_normal(n) * 1e-6])
    specials = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, np.nan, 1e-310 if dtype == C128 else 1e-40,
                1e300 if dtype == C128 else 1e38]
    grid = np.array([complex(a, b) for a in specials for b in specials])
    z = np.concatenate([re + 1j * im, grid]).astype(dtype)
    for fn in (np.sqrt, np.log):
        f = jit(lambda z: fn(z))
        with np.errstate(all="ignore"):
            f(z)
            got, want = f(z), fn(z)
        assert got.dtype == want.dtype and _compiled(f), f.explain()
        assert _part_ulps(got, want) <= 4, fn
        # the signs of C's zeros and infinities
        g, w = got[-grid.size:], want[-grid.size:]
        for part in ("real", "imag"):
            a, b = getattr(g, part), getattr(w, part)
            exact = np.isinf(b) | (b == 0)
            assert np.array_equal(a[exact], b[exact]) and np.array_equal(np.signbit(a[exact]), np.signbit(b[exact]))


@pytest.mark.parametrize("dtype", [C64, C128])
def test_complex_sums_and_means_are_their_parts_in_kernels(dtype):
    """sum and mean of a complex array, over any axes, are the complex of the
    parts' reductions (numpy adds the parts apart too): kernels, one compile."""
    def fn(z, c):
        w = z * c
        return w.sum(), np.sum(w, axis=1), z.mean(axis=-1, keepdims=True), np.mean(z * 2, axis=(0, 1))
    f = jit(fn)
    rng = np.random.default_rng(3)
    for shape in ((3, 4, 5), (7, 2, 9), (6, 33, 17)):
        z = _complex(rng, int(np.prod(shape)), dtype, specials=False).reshape(shape)
        c = _complex(rng, shape[-1], dtype, specials=False)
        f(z, c)
        got, want = f(z, c), fn(z, c)
        scale = float(np.abs(z * c).sum() + np.abs(z).sum() * 2)  # (the summation order: ulps of the terms)
        assert_like_numpy(got, want, ulps=8, atol=8 * np.finfo(z.real.dtype).eps * scale)
    assert f.stats()["compiles"] == 1 and f.stats()["eager_nodes"] == 0
    assert not [line for line in f.explain().splitlines() if "numpy:" in line and ("sum" in line or "mean" in line)]


def test_angle_and_the_conj_method_compile():
    """np.angle (of complex and real arrays, in degrees too) is arctan2 of
    the parts; z.conj() is np.conj's kernel, and a real array's .conj() is
    the array itself, as numpy's."""
    def fn(z, x):
        return np.angle(z), np.angle(z * 2, deg=True), np.angle(x), z.conj() * z.conjugate(), x.conj() is x
    f = jit(fn)
    rng = np.random.default_rng(4)
    for n in (5, 300):
        z, x = _complex(rng, max(n, 8), C128)[:n], rng.standard_normal(n)
        with np.errstate(all="ignore"):
            f(z, x)
            got, want = f(z, x), fn(z, x)
        assert_like_numpy(got, want, ulps=4)
    assert _compiled(f) and f.stats()["eager_nodes"] == 0, f.explain()


def parts_of(z):
    return z.real, z.imag, np.real(z[::2]), z.real * 2


def test_the_parts_of_a_complex_argument_returned_are_views_of_it(backend):
    """z.real and z.imag (np.real, of a view of z too) returned: numpy's
    views of the caller's array (a write into one reaches z, and one into z
    reaches them); the compiled entries returned copies (probe 19).  A part
    computed on, `z.real * 2`, is a new array."""
    f = jit(parts_of, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JitWarning)
        _parts_of_calls(f)


def _parts_of_calls(f):
    for n in (1, 2, 3, 5, 8):
        for dtype in (np.complex128, np.complex64):
            z = (np.arange(n) + 1j * np.arange(n, 0, -1)).astype(dtype)
            got, want = f(z), parts_of(z.copy())
            assert_like_numpy(list(got), list(want))
            assert [np.shares_memory(g, z) for g in got] == [True, True, True, False]
            got[0][0] = 100.0
            assert z[0].real == 100.0
            z[-1] = 7 + 7j
            assert got[1][-1] == 7.0

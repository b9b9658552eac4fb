"""Complex numbers in fused kernels, a part at a time.

A complex value is its two parts (`CValue`), each an LLVM float of the
part's dtype (float32 for complex64, float64 for complex128).  Arrays of
complex numbers are numpy's layout, real then imaginary part, and are read
and written a part at a time (codegen/access.py), which LLVM's loop
vectorizer turns into interleaved vector loads and stores.

The formulas are numpy's, so results match its bits (its umath loops,
npymath's cpow): multiply (ar*br - ai*bi, ar*bi + ai*br) rounded once per
part where numpy's SIMD loop fuses them (numpy_fuses_products); divide by
Smith's method with numpy's branch on |br| >= |bi| and its division of each
part by |br| when the divisor is 0; absolute as numpy's SIMD hypot; power 2
as numpy's square, 3 as its repeated product.  The ops a kernel computes
for complex results are the ones shapes/ops.py KERNEL_KINDS gives the kind
"c" (exp as C's cexp, from our exp, cos and sin: a few ulp); abs, real,
imag, ==, != and isnan/isinf/isfinite take complex operands.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from llvmlite import ir

from codegen import mathlib
from codegen.emitters import EMITTERS as REAL, intrinsic
from shapes import host

F32, F64 = ir.FloatType(), ir.DoubleType()


class CValue(NamedTuple):
    """A complex value: its real and imaginary parts (LLVM floats of one type)."""
    re: ir.Value
    im: ir.Value

    @property
    def type(self):
        """The parts' LLVM type."""
        return self.re.type


def part_dtype(dt: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's parts."""
    return np.dtype(np.float32) if np.dtype(dt) == np.complex64 else np.dtype(np.float64)


def part_type(dt: np.dtype):
    return F32 if np.dtype(dt) == np.complex64 else F64


def const(dt: np.dtype, c) -> CValue:
    c = complex(c)
    t = part_type(dt)
    return CValue(ir.Constant(t, c.real), ir.Constant(t, c.imag))


@functools.cache
def numpy_fuses_products() -> bool:
    """Whether numpy's complex multiply on this CPU rounds once per part:
    its AVX2 and AVX-512 loops (dispatched where the CPU has FMA3) take
    re = fma(ar, br, -(ai*bi)) and im = fma(ar, bi, ai*br); its baseline
    loop rounds the products first."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as cpu
        return bool(cpu.get("FMA3") and cpu.get("AVX2"))
    except ImportError:  # (numpy moved it: the CPU's own features decide)
        return "+fma" in host.features().split(",") and "+avx2" in host.features().split(",")


def _fma(b, x, y, z):
    return b.call(intrinsic(b.module, "llvm.fma", x.type, 3), [x, y, z])


def _mul(b, x: CValue, y: CValue, fused: bool | None = None) -> CValue:
    """numpy's complex product: its SIMD loop's on this CPU (multiply,
    square: numpy_fuses_products), or its scalar C one (fused=False: the
    products of power's repeated multiplication)."""
    if numpy_fuses_products() if fused is None else fused:
        return CValue(_fma(b, x.re, y.re, b.fneg(b.fmul(x.im, y.im))), _fma(b, x.re, y.im, b.fmul(x.im, y.re)))
    return CValue(b.fsub(b.fmul(x.re, y.re), b.fmul(x.im, y.im)),
                  b.fadd(b.fmul(x.re, y.im), b.fmul(x.im, y.re)))


def _absolute(b, m, x: CValue):
    """|x| as numpy's SIMD loop takes it: an infinite part makes it inf, else
    a NaN part NaN; larger * sqrt(1 + (smaller/larger)**2), the ratio 0
    where larger is 0 or smaller is inf (the square and add fused where
    numpy fuses them: numpy_fuses_products)."""
    t = x.type
    fabs, sqrt = intrinsic(m, "llvm.fabs", t, 1), intrinsic(m, "llvm.sqrt", t, 1)
    inf, zero, one = ir.Constant(t, float("inf")), ir.Constant(t, 0.0), ir.Constant(t, 1.0)
    nan = ir.Constant(t, float("nan"))
    re, im = b.call(fabs, [x.re]), b.call(fabs, [x.im])
    re_inf, im_inf = b.fcmp_ordered("==", re, inf), b.fcmp_ordered("==", im, inf)
    im = b.select(re_inf, inf, im)
    re = b.select(im_inf, inf, re)
    re_num, im_num = b.fcmp_ordered("ord", re, re), b.fcmp_ordered("ord", im, im)
    im = b.select(re_num, im, nan)
    re = b.select(im_num, re, nan)
    re_big = b.fcmp_ordered(">", re, im)
    larger, smaller = b.select(re_big, re, im), b.select(re_big, im, re)
    divides = b.not_(b.or_(b.fcmp_ordered("==", larger, zero), b.fcmp_ordered("==", smaller, inf)))
    ratio = b.select(divides, b.fdiv(smaller, larger), zero)
    sq = _fma(b, ratio, ratio, one) if numpy_fuses_products() else b.fadd(b.fmul(ratio, ratio), one)
    return b.fmul(b.call(sqrt, [sq]), larger)


def _div(b, m, x: CValue, y: CValue) -> CValue:
    """numpy's complex division (Smith's method): by the part of larger
    magnitude; a zero divisor divides each part by |br| (inf or NaN parts)."""
    t = y.type
    fabs = intrinsic(m, "llvm.fabs", t, 1)
    abs_r, abs_i = b.call(fabs, [y.re]), b.call(fabs, [y.im])
    one, zero = ir.Constant(t, 1.0), ir.Constant(t, 0.0)
    # |br| >= |bi| (ordered: a NaN part takes the other branch, as numpy's C comparison does)
    real_big = b.fcmp_ordered(">=", abs_r, abs_i)
    both_zero = b.and_(b.fcmp_ordered("==", abs_r, zero), b.fcmp_ordered("==", abs_i, zero))
    # |br| >= |bi|: rat = bi/br, scl = 1/(br + bi*rat)
    rat1 = b.fdiv(y.im, y.re)
    scl1 = b.fdiv(one, b.fadd(y.re, b.fmul(y.im, rat1)))
    re1 = b.fmul(b.fadd(x.re, b.fmul(x.im, rat1)), scl1)
    im1 = b.fmul(b.fsub(x.im, b.fmul(x.re, rat1)), scl1)
    # else: rat = br/bi, scl = 1/(bi + br*rat)
    rat2 = b.fdiv(y.re, y.im)
    scl2 = b.fdiv(one, b.fadd(y.im, b.fmul(y.re, rat2)))
    re2 = b.fmul(b.fadd(b.fmul(x.re, rat2), x.im), scl2)
    im2 = b.fmul(b.fsub(b.fmul(x.im, rat2), x.re), scl2)
    # a zero divisor: each part over |br|
    re0, im0 = b.fdiv(x.re, abs_r), b.fdiv(x.im, abs_r)
    re = b.select(real_big, b.select(both_zero, re0, re1), re2)
    im = b.select(real_big, b.select(both_zero, im0, im1), im2)
    return CValue(re, im)


def _power(b, m, x: CValue, e) -> CValue:
    if e == 1:
        return x
    if e == 2:
        return _mul(b, x, x)
    if e == 3:  # (numpy's power, not its square: its C loop's products)
        return _mul(b, x, _mul(b, x, x, fused=False), fused=False)
    raise NotImplementedError(f"complex power with exponent {e}")


def _exp(b, m, x: CValue) -> CValue:
    """exp(x) as C99's cexp (numpy calls the C library's): exp(re) * (cos im,
    sin im) (our exp, cos and sin: a few ulp), a real part past the largest
    exp (709 in double, 88 in float) taken in steps of it and past three
    steps the largest float times (cos, sin); C's values for infinite and
    NaN parts (an infinite real part: inf or 0 with the signs of cos and
    sin, (inf, im) and (0, im) for a zero im; a finite real part with an
    infinite or NaN im: NaN; a NaN real part: NaN, im kept when 0)."""
    t = x.type
    fabs, copysign = intrinsic(m, "llvm.fabs", t, 1), intrinsic(m, "llvm.copysign", t, 2)
    big = 709.0 if t == F64 else 88.0
    inf, nan, zero = ir.Constant(t, float("inf")), ir.Constant(t, float("nan")), ir.Constant(t, 0.0)
    re, im = x.re, x.im
    im_finite = b.fcmp_ordered("<", b.call(fabs, [im]), inf)
    im_safe = b.select(im_finite, im, zero)  # (cos and sin of a finite value)
    c, s = mathlib.emit(b, "cos", [im_safe]), mathlib.emit(b, "sin", [im_safe])
    # a finite real part: exp in steps of `big` where it would overflow
    step = ir.Constant(t, big)
    exp_step = mathlib.emit(b, "exp", [step])
    for _ in range(2):
        over = b.fcmp_ordered(">", re, step)
        re = b.select(over, b.fsub(re, step), re)
        c, s = b.select(over, b.fmul(c, exp_step), c), b.select(over, b.fmul(s, exp_step), s)
    still = b.fcmp_ordered(">", re, step)
    e = b.select(still, ir.Constant(t, float(np.finfo(np.float64 if t == F64 else np.float32).max)),
                 mathlib.emit(b, "exp", [b.select(still, zero, re)]))
    fin_re, fin_im = b.fmul(e, c), b.fmul(e, s)
    fin_re, fin_im = b.select(im_finite, fin_re, nan), b.select(im_finite, fin_im, nan)
    # an infinite real part
    im_zero = b.fcmp_ordered("==", im, zero)
    pos = b.fcmp_ordered(">", x.re, zero)
    value = b.select(pos, inf, zero)
    inf_re = b.select(im_finite, b.select(im_zero, value, b.call(copysign, [value, c])),
                      value)
    inf_im = b.select(im_finite, b.select(im_zero, im, b.call(copysign, [value, s])),
                      b.select(pos, b.fsub(im, im), b.call(copysign, [zero, im])))
    # a NaN real part
    nan_im = b.select(im_zero, im, nan)
    re_finite = b.fcmp_ordered("<", b.call(fabs, [x.re]), inf)
    re_nan = b.fcmp_unordered("uno", x.re, x.re)
    out_re = b.select(re_finite, fin_re, b.select(re_nan, x.re, inf_re))
    out_im = b.select(re_finite, fin_im, b.select(re_nan, nan_im, inf_im))
    return CValue(out_re, out_im)


def _in_double(fn):
    """A complex64 function evaluated in double and rounded once per part
    (C's float functions round each step: ours is as close or closer)."""
    def emit(b, m, x: CValue) -> CValue:
        if x.type == F64:
            return fn(b, m, x)
        r = fn(b, m, CValue(b.fpext(x.re, F64), b.fpext(x.im, F64)))
        return CValue(b.fptrunc(r.re, F32), b.fptrunc(r.im, F32))
    return emit


@_in_double
def _sqrt(b, m, x: CValue) -> CValue:
    """The principal square root as C99's csqrt (glibc's algorithm): for
    finite parts, d = |x|, r = sqrt((d + re)/2) and s = im/(2r) (re > 0),
    else s = sqrt((d - re)/2) and r = |im|/(2s), with re and im divided by
    4 where a part passes a quarter of the largest double (the result's parts
    doubled, or im/r taken whole when |im| < 1) and multiplied by 2^54 where
    both are subnormal (the result's by 2^-27); im = 0 or re = 0 exactly as
    C's special cases; C's values for infinite and NaN parts (im infinite:
    (inf, im); re infinite: (inf, 0) or (0, inf) with im's sign, NaN for a
    NaN im)."""
    t = F64
    fabs, copysign = intrinsic(m, "llvm.fabs", t, 1), intrinsic(m, "llvm.copysign", t, 2)
    sqrt = intrinsic(m, "llvm.sqrt", t, 1)
    c = lambda v: ir.Constant(t, v)  # noqa: E731
    fi = np.finfo(np.float64)
    re, im = x.re, x.im
    ax, ay = b.call(fabs, [re]), b.call(fabs, [im])
    quarter = c(float(fi.max) / 4)
    re_big = b.fcmp_ordered(">", ax, quarter)
    big = b.or_(re_big, b.fcmp_ordered(">", ay, quarter))
    tiny = b.and_(b.fcmp_ordered("<", ax, c(2 * float(fi.tiny))), b.fcmp_ordered("<", ay, c(2 * float(fi.tiny))))
    # (scaled by powers of 2: exact, but for re's subnormal bits, dropped as C drops them)
    keep_re = b.or_(re_big, b.fcmp_ordered(">=", ax, c(4 * float(fi.tiny))))
    xs = b.select(big, b.select(keep_re, b.fmul(re, c(0.25)), c(0.0)), b.select(tiny, b.fmul(re, c(2.0 ** 54)), re))
    ys = b.select(big, b.fmul(im, c(0.25)), b.select(tiny, b.fmul(im, c(2.0 ** 54)), im))
    d = mathlib.emit(b, "hypot", [xs, ys])
    half = c(0.5)
    whole = b.and_(big, b.fcmp_ordered("<", b.call(fabs, [ys]), c(1.0)))  # (C's scale 1 with |im| < 1)
    r_pos = b.call(sqrt, [b.fmul(half, b.fadd(d, xs))])
    s_pos = b.select(whole, b.fdiv(ys, r_pos), b.fmul(half, b.fdiv(ys, r_pos)))
    r_pos = b.select(whole, b.fmul(r_pos, c(2.0)), r_pos)
    s_neg = b.call(sqrt, [b.fmul(half, b.fsub(d, xs))])
    r_neg = b.select(whole, b.call(fabs, [b.fdiv(ys, s_neg)]), b.call(fabs, [b.fmul(half, b.fdiv(ys, s_neg))]))
    s_neg = b.select(whole, b.fmul(s_neg, c(2.0)), s_neg)
    positive = b.fcmp_ordered(">", xs, c(0.0))
    up = b.select(whole, c(1.0), b.select(big, c(2.0), b.select(tiny, c(2.0 ** -27), c(1.0))))
    r = b.fmul(b.select(positive, r_pos, r_neg), up)
    s = b.fmul(b.select(positive, s_pos, s_neg), up)
    # re = 0: r = s = sqrt(|im|/2) (or sqrt(2|im|)/2 where |im| is subnormal)
    re_zero = b.fcmp_ordered("==", re, c(0.0))
    on_axis = b.select(b.fcmp_ordered(">=", ay, c(2 * float(fi.tiny))), b.call(sqrt, [b.fmul(half, ay)]),
                       b.fmul(half, b.call(sqrt, [b.fmul(c(2.0), ay)])))
    r, s = b.select(re_zero, on_axis, r), b.select(re_zero, on_axis, s)
    # im = 0: a real square root (of -re, on the imaginary side, for re < 0)
    im_zero = b.fcmp_ordered("==", im, c(0.0))
    re_neg = b.fcmp_ordered("<", re, c(0.0))
    root = b.call(sqrt, [ax])
    r = b.select(im_zero, b.select(re_neg, c(0.0), root), r)
    s = b.select(im_zero, b.select(re_neg, root, c(0.0)), s)
    fin = CValue(r, b.call(copysign, [s, im]))
    # infinite and NaN parts
    inf, nan = c(float("inf")), c(float("nan"))
    im_inf, re_inf = b.fcmp_ordered("==", ay, inf), b.fcmp_ordered("==", ax, inf)
    im_nan = b.fcmp_unordered("uno", im, im)
    signed_zero = b.call(copysign, [c(0.0), im])
    inf_re = CValue(b.select(re_neg, b.select(im_nan, nan, c(0.0)), re),
                    b.select(re_neg, b.call(copysign, [inf, im]), b.select(im_nan, nan, signed_zero)))
    finite = b.and_(b.fcmp_ordered("<", ax, inf), b.fcmp_ordered("<", ay, inf))
    out = CValue(b.select(re_inf, inf_re.re, nan), b.select(re_inf, inf_re.im, nan))
    out = CValue(b.select(im_inf, inf, out.re), b.select(im_inf, im, out.im))
    return CValue(b.select(finite, fin.re, out.re), b.select(finite, fin.im, out.im))


def _two_sum(b, x, y):
    """(s, e): s = x + y rounded, e its rounding error exactly (Knuth)."""
    s = b.fadd(x, y)
    bb = b.fsub(s, x)
    return s, b.fadd(b.fsub(x, b.fsub(s, bb)), b.fsub(y, bb))


@_in_double
def _log(b, m, x: CValue) -> CValue:
    """The principal logarithm as C99's clog: (log|x|, atan2(im, re)).  Near
    |x| = 1 (the larger part in [0.5, 2), the smaller below 1) log|x| is
    log1p(re^2 + im^2 - 1)/2 with the squares' sum minus 1 taken to an ulp
    (products split by fma, the sums' errors kept), elsewhere
    log(hypot(re, im)); a NaN part gives NaN parts, inf's real part if the
    other is infinite; 0 gives -inf."""
    t = F64
    fabs = intrinsic(m, "llvm.fabs", t, 1)
    c = lambda v: ir.Constant(t, v)  # noqa: E731
    ax, ay = b.call(fabs, [x.re]), b.call(fabs, [x.im])
    swap = b.fcmp_ordered("<", ax, ay)
    hi, lo = b.select(swap, ay, ax), b.select(swap, ax, ay)
    p, q = b.fmul(hi, hi), b.fmul(lo, lo)
    e, f = _fma(b, hi, hi, b.fneg(p)), _fma(b, lo, lo, b.fneg(q))
    # hi^2 + lo^2 - 1 = (s1 - 1) + t1 + e + f, s1 - 1 exact (s1 in [0.25, 5]: to
    # well under an ulp of the result), the rest added with their errors kept
    s1, t1 = _two_sum(b, p, q)
    u, v = _two_sum(b, b.fsub(s1, c(1.0)), t1)
    g, h = _two_sum(b, e, f)
    w, y = _two_sum(b, u, g)
    d2m1 = b.fadd(w, b.fadd(b.fadd(y, v), h))
    near = b.and_(b.and_(b.fcmp_ordered(">=", hi, c(0.5)), b.fcmp_ordered("<", hi, c(2.0))),
                  b.fcmp_ordered("<", lo, c(1.0)))
    near_one = b.fmul(mathlib.emit(b, "log1p", [b.select(near, d2m1, c(0.0))]), c(0.5))
    far = mathlib.emit(b, "log", [mathlib.emit(b, "hypot", [hi, lo])])
    return CValue(b.select(near, near_one, far), mathlib.emit(b, "arctan2", [x.im, x.re]))


# complex operands (already cast to the dtype the op computes in) -> the result
EMITTERS = {
    "sqrt": _sqrt,
    "log": _log,
    "complex_of": lambda b, m, re, im: CValue(re, im),
    "exp": _exp,
    "add": lambda b, m, x, y: CValue(b.fadd(x.re, y.re), b.fadd(x.im, y.im)),
    "subtract": lambda b, m, x, y: CValue(b.fsub(x.re, y.re), b.fsub(x.im, y.im)),
    "multiply": lambda b, m, x, y: _mul(b, x, y),
    "divide": _div,
    "square": lambda b, m, x: _mul(b, x, x),
    "power": _power,
    "negative": lambda b, m, x: CValue(b.fneg(x.re), b.fneg(x.im)),
    "positive": lambda b, m, x: x,
    "conjugate": lambda b, m, x: CValue(x.re, b.fneg(x.im)),
    "absolute": _absolute,
    "real": lambda b, m, x: x.re, "imag": lambda b, m, x: x.im,
    "equal": lambda b, m, x, y: b.and_(b.fcmp_ordered("==", x.re, y.re), b.fcmp_ordered("==", x.im, y.im)),
    "not_equal": lambda b, m, x, y: b.or_(b.fcmp_unordered("!=", x.re, y.re), b.fcmp_unordered("!=", x.im, y.im)),
    # (a part's, as a float's: either part NaN or infinite, both finite)
    "isnan": lambda b, m, x: b.or_(REAL["isnan"](b, m, x.re), REAL["isnan"](b, m, x.im)),
    "isinf": lambda b, m, x: b.or_(REAL["isinf"](b, m, x.re), REAL["isinf"](b, m, x.im)),
    "isfinite": lambda b, m, x: b.and_(REAL["isfinite"](b, m, x.re), REAL["isfinite"](b, m, x.im)),
    "where": lambda b, m, c, x, y: CValue(b.select(c, x.re, y.re), b.select(c, x.im, y.im)),
    "astype": lambda b, m, x: x,
}

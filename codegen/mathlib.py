"""Vectorizable transcendental functions emitted directly as llvmlite IR.

Why this exists
---------------
A call to ``llvm.exp.f32`` (or ``expf``) inside a loop lowers to one scalar
libm call per element and blocks LLVM's loop vectorizer.  The functions here
are emitted as *scalar, branch-free, straight-line* IR built only from
operations the vectorizer can widen: ``fadd/fsub/fmul/fdiv/fneg``, ``fcmp`` +
``select``, bitcasts between floats and integers, integer
add/sub/mul/shift/and/xor/icmp, ``sitofp``/``fptosi``/``fpext``/``fptrunc``
and the intrinsics ``llvm.fma``, ``llvm.fabs``, ``llvm.rint`` and
``llvm.copysign``.  Special cases (NaN, +-inf, overflow, underflow, signed
zeros) are handled with ``fcmp`` + ``select``, never with branches, so a loop
``out[i] = f(in[i])`` vectorizes at O3 (``<16 x float>`` / ``<8 x double>`` on
AVX-512).  No libm function is ever called and nothing but intrinsic
declarations is added to the module (no tables, no globals).  ``llvm.fma``
must be a native instruction to be fast (x86-64 with FMA3, AArch64); elsewhere
LLVM falls back to a correct but slow ``fma`` libcall.

API
---
``emit(builder, name, [x])`` emits ``name(x)`` for a ``float`` or ``double``
scalar ``x`` and returns a value of the same type; ``SUPPORTED`` lists the
names: exp, expm1, log, log1p, tanh, sigmoid (1/(1+exp(-x))), erf, sin, cos,
arctan, and the two-argument arctan2(y, x) and hypot(x, y) (``BINARY``).

Precision
---------
Polynomials are near-minimax Chebyshev fits (generated offline with mpmath,
verified by dense sampling), two sets per function: ~2^-30 relative error for
float32, ~2^-55 for float64.  float32 functions run natively in float (full
SIMD width) except sin/cos, which run in double (see below) and are rounded
once.  Measured maximum errors in ulp (float32: exhaustive over every float
input; float64: tens of millions of random samples plus special values,
against long double / mpmath / math.erf):

                 vs correctly rounded     vs numpy, same dtype
                 float32    float64       float32    float64
    exp             1          1             3          1
    expm1           1          2             2          2
    log             1          1             4          1
    log1p           1          1             2          1
    tanh            2          1             3          2
    sigmoid         2          2             2          2
    erf             1          1             1          1   (numpy: math.erf)
    arctan          1          1             2          1
    sin, cos        1          1             1          1
    arctan2         0          -           1-3        1-2   (800,000 pairs; 3 and 2 on znver4)
    hypot           0          -             0          1   (800,000 pairs)

(float32 log: numpy's own AVX-512 logf is up to 4 ulp away from the correctly
rounded result, this one is within 1; float32 arctan2: numpy's AVX-512 loop
is up to 3 ulp from float64's result rounded on an AMD EPYC znver4, this one
0 there, so the tests hold float32 arctan2 and hypot to that.)  NaN gives
NaN; infinities and signed zeros follow numpy; exp/expm1 overflow gives inf
and underflow gives correctly rounded subnormals and 0.

Algorithms (all branch-free)
----------------------------
exp     n = rint(x log2e); r = x - n ln2 with a two-constant Cody-Waite
        reduction whose first fma is exact; exp(r) = 1 + (r + r^2 q(r));
        2^n is built in the exponent bits in two steps, so overflow rounds to
        inf and underflow to correctly scaled subnormals or 0.
expm1   same reduction; expm1(x) = 2^n expm1(r) + (2^n - 1) (one fma).
log     x = 2^k m, m in [sqrt(1/2), sqrt(2)) with integer ops on the bits
        (subnormals are pre-scaled); fdlibm's formulation
        log(m) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f), f = m - 1 exact.
log1p   u = 1 + x, log(u) + c/u where c is the exact rounding error of u.
tanh    float64: |x| < 0.55 odd polynomial, else 1 - 2/(exp(2|x|) + 1);
        float32: e/(e + 2) with e = expm1(2|x|) (no cancellation anywhere);
        saturated argument and copysign.
sigmoid e = exp(-|x|); 1/(1+e) for x >= 0, e/(1+e) for x < 0: never
        overflows and reaches the subnormal range for very negative x.
erf     |x| < 1: x + x F(x^2); 1 <= |x| < 6: 1 - exp(-x^2) g(1/x) with g a
        two-piece polynomial whose coefficients are chosen per lane with
        selects and x^2 split exactly with an fma so exp(-x^2) keeps full
        accuracy; |x| >= 6: +-1.
arctan  fdlibm's reduction (breakpoints 7/16, 11/16, 19/16, 39/16:
        t = (|x| - c)/(1 + c|x|) or -1/|x|) selected per lane, atan(c) as
        hi + lo, odd polynomial in t.
arctan2 z = arctan(|y| / |x|) (0 when both are 0, pi/4 when both are inf),
        pi - z when x's sign bit is set, with y's sign: C99's special cases
        (signed zeros, infinities) fall out of these selects.
hypot   sqrt(fma(a, a, b b)) of |x|, |y| scaled by 2^-600 or 2^600 when
        the larger is above 2^500 or below 2^-500 (no overflow or
        underflow in the squares), scaled back; inf when either is inf
        (also with a NaN, as C99 says).
float32 arctan2 and hypot run in double (the squares of any float are
        exact there) and are rounded once.
sin/cos x = j pi/2 + r with r as a double-double, sin/cos kernels for r, the
        quadrant picked with selects.  float64 |x| < 2^30: three-constant
        Cody-Waite reduction (exact first step, TwoSum for the second).
        Larger float64 and *all* float32 arguments: a branch-free
        Payne-Hanek reduction: the exponent selects (with selects, no table
        loads) four 53-bit chunks of 2/pi, the products are formed exactly
        with fma, huge terms are reduced mod 4 exactly and the sum is carried
        in double-double.

Large arguments of sin/cos
--------------------------
The reduction is exact-to-double-double over the whole finite range, so there
is no cut-off: float32 sin/cos are within 1 ulp for every float (checked
exhaustively) and float64 sin/cos stayed within 1 ulp on random arguments up to
1.8e308 and on the hardest known case (x = 6381956970095103 * 2^797, which is
within 4.7e-19 of a multiple of pi/2).  The guaranteed bound for float64
|x| >= 2^30 is an absolute error below ~1e-30 in the reduced argument, i.e.
<= 1-2 ulp except possibly for a few arguments pathologically close to a
multiple of pi/2, whose *absolute* error stays below ~1e-30.  +-inf and NaN
give NaN.  The price of full-range correctness is speed: the Payne-Hanek
path is always evaluated (no branches), so sin/cos cost ~7-8x an exp.

Requirements on the caller
--------------------------
The code relies on strict IEEE semantics: no fast-math flags (``reassoc``,
``contract``, ``nnan``, ``ninf``, ``afn``...) on these instructions or on the
function, otherwise LLVM may break the error-free transformations (TwoSum,
exact Cody-Waite steps) and drop the NaN/inf selects.  Subnormals must not be
flushed (default MXCSR, as numpy runs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir

__all__ = ["BINARY", "SUPPORTED", "emit"]

BINARY: frozenset[str] = frozenset({"arctan2", "hypot"})  # two arguments
SUPPORTED: frozenset[str] = frozenset(
    {"exp", "expm1", "log", "log1p", "tanh", "sigmoid", "erf", "sin", "cos", "arctan"}
) | BINARY

# float32 sin/cos are evaluated in double (the exact Payne-Hanek reduction of
# any float argument is a double computation) and rounded once; every other
# float32 function runs natively in float, at full SIMD width.
_F32_VIA_DOUBLE = frozenset({"sin", "cos", "arctan2", "hypot"})

_INF = math.inf
_NAN = math.nan

# ---------------------------------------------------------------------------
# Polynomial coefficients, lowest degree first.  Generated offline with
# mpmath.chebyfit (near-minimax) and verified by dense sampling; *_S sets give
# ~2^-30 relative accuracy (float32 results), *_D sets ~2^-55 (float64).
# ---------------------------------------------------------------------------
# (exp(r) - 1 - r) / r^2 on |r| <= ln2/2
_EXP_Q_S = (
    0.500000001353873, 0.16666666681704215, 0.04166646419740569, 0.008333310844647862,
    0.0013933730715792083, 0.00019891080463998843,
)
_EXP_Q_D = (
    0.5, 0.1666666666666667, 0.04166666666666667, 0.008333333333326084,
    0.0013888888888883711, 0.0001984126987500228, 2.480158732567746e-05,
    2.755725517000089e-06, 2.755727347871858e-07, 2.5105312729622103e-08,
    2.09147553258932e-09,
)
# (2 atanh(s)/s - 2) / s^2 as a polynomial in z = s^2, s^2 <= 0.0295 (fdlibm's R/z)
_LOG_L_S = (
    0.6666666655404201, 0.4000012221181065, 0.28550778633191964, 0.23331614471843498,
)
_LOG_L_D = (
    0.666666666666667, 0.3999999999989889, 0.28571428626253836, 0.22222211089379496,
    0.1818289243253687, 0.15331611722055008, 0.14617807153417325,
)
# (tanh(x) - x) / x^3 as a polynomial in z = x^2, |x| <= 0.55 (float64 only)
_TANH_T_D = (
    -0.3333333333333333, 0.1333333333333271, -0.05396825396742711,
    0.021869488493351966, -0.008863234390552772, 0.0035921102829827483,
    -0.0014556610653503473, 0.0005889322836960864, -0.0002346235564045879,
    8.509481082749288e-05, -2.059003703476761e-05,
)
# (sin(r) - r) / r^3 and (cos(r) - 1 + r^2/2) / r^4 in z = r^2, |r| <= 1.02 pi/4
_SIN_S_S = (
    -0.16666666663373741, 0.008333331691203202, -0.000198399895773847,
    2.7237577241177232e-06,
)
_SIN_S_D = (
    -0.16666666666666666, 0.008333333333333331, -0.0001984126984126402,
    2.7557319218542833e-06, -2.5052105961377e-08, 1.605848950955874e-10,
    -7.584263996034166e-13,
)
_COS_C_S = (
    0.041666666663919334, -0.0013888887518862508, 2.4800519285940304e-05,
    -2.729065239797453e-07,
)
_COS_C_D = (
    0.041666666666666664, -0.0013888888888888887, 2.4801587301584066e-05,
    -2.755731922096008e-07, 2.087675564036913e-09, -1.1470437475266499e-11,
    4.7445191096480046e-14,
)
# (atan(t) - t) / t^3 in z = t^2, |t| <= 7/16
_ATAN_A_S = (
    -0.33333333329456305, 0.1999999801349833, -0.1428554691787246, 0.111057763655916,
    -0.09008830795770216, 0.07027295129441699, -0.0382748653749744,
)
_ATAN_A_D = (
    -0.3333333333333333, 0.19999999999999404, -0.14285714285565465, 0.111111110965279,
    -0.09090908350382436, 0.07692285419714515, -0.06666239748865294,
    0.05876924062763387, -0.05216532007308444, 0.044916556747777434,
    -0.033114228762660534, 0.014759380407779155,
)
# erf(x)/x - 1 in z = x^2, |x| <= 1
_ERF_F_S = (
    0.12837916706151753, -0.3761263846774074, 0.11283782490078903, -0.0268654303851591,
    0.005221030734855508, -0.0008484063283527477, 0.00011265824431458933,
    -9.666631243926762e-06,
)
_ERF_F_D = (
    0.1283791670955126, -0.3761263890318375, 0.11283791670954878, -0.02686617064507674,
    0.0052239776248174784, -0.0008548326980801447, 0.00012055331110409494,
    -1.4925595235970651e-05, 1.6460999970345427e-06, -1.6350307065234626e-07,
    1.4659736155673959e-08, -1.1372693191126323e-09, 5.956905633653031e-11,
)
# g(t) = erfc(1/t) exp(1/t^2) in u = t - 0.75 for t in [1/2, 1] (x in [1, 2]) ...
_ERFC_G1_S = (
    0.3511346940289053, 0.3413688586812983, -0.15457007036527443, 0.04956777203803198,
    0.0024432739697374264, -0.02219851215905527, 0.02413629525818941,
    -0.017743204058154896, 0.008187711858482978,
)
_ERFC_G1_D = (
    0.3511346940289053, 0.34136885869943456, -0.15457007331395745, 0.0495677724353976,
    0.002443898303639562, -0.02219919520097945, 0.024101016571122468,
    -0.01769633383350367, 0.008907502333548317, -0.0010414520840913311,
    -0.004398910230289147, 0.007073914746891196, -0.007350431410082633,
    0.0060311829336129105, -0.0036683293902526294, -5.042960244719547e-05,
    0.002533981790455155,
)
# ... and in u = t - 11/32 for t in [1/6, 1/2] (x in [2, 6])
_ERFC_G2_S = (
    0.1840788107336776, 0.4855552160986065, -0.18288038245858015, -0.04356312867794602,
    0.15444162535280673, -0.13491918172836312, 0.008152440950976971,
    0.1684368497459113, -0.2658012059772111,
)
_ERFC_G2_D = (
    0.18407881076289145, 0.485555218637865, -0.18288042109796568, -0.04356441978075927,
    0.15444922810052883, -0.13473713785222502, 0.007717192089407245, 0.158592568837759,
    -0.2609263754883148, 0.19333281480746606, 0.09601601133956342, -0.5349655421800376,
    0.8773032486268616, -0.7455734711071434, -0.2766307766893761, 2.7765722236301134,
    -4.965082944923241,
)


@dataclass(frozen=True)
class _Prec:
    """Coefficient sets and input format for one target precision."""

    exp_q: tuple
    log_l: tuple
    tanh_t: tuple
    sin_s: tuple
    cos_c: tuple
    atan_a: tuple
    erf_f: tuple
    erfc_g1: tuple
    erfc_g2: tuple
    in_bits: int  # significant bits of the *source* format (sin/cos reduction)
    in_max_exp: int  # largest binary exponent of a finite source value


_SINGLE = _Prec(exp_q=_EXP_Q_S, log_l=_LOG_L_S, tanh_t=(), sin_s=_SIN_S_S, cos_c=_COS_C_S,
                atan_a=_ATAN_A_S, erf_f=_ERF_F_S, erfc_g1=_ERFC_G1_S, erfc_g2=_ERFC_G2_S,
                in_bits=24, in_max_exp=127)
_DOUBLE = _Prec(exp_q=_EXP_Q_D, log_l=_LOG_L_D, tanh_t=_TANH_T_D, sin_s=_SIN_S_D, cos_c=_COS_C_D,
                atan_a=_ATAN_A_D, erf_f=_ERF_F_D, erfc_g1=_ERFC_G1_D, erfc_g2=_ERFC_G2_D,
                in_bits=53, in_max_exp=1023)

# ---------------------------------------------------------------------------
# Constants.  Multi-part constants: hi + lo (+ lo2) is the value to ~106+ bits.
# ---------------------------------------------------------------------------
_LOG2E = 1.4426950408889634
# ln2 for the exp reduction: full-width hi (the first fma is exact anyway)
_LN2_D = (0.6931471805599453, 2.3190468138462996e-17)
_LN2_F = (0.6931471824645996, -1.9046542121259336e-09)  # float32(ln2), remainder
# ln2 for log: hi has trailing zero bits so k*hi is exact (|k| < 2^20 in double,
# |k| < 2^8 in float; fdlibm's constants)
_LN2_LOG = (6.93147180369123816490e-01, 1.90821492927058770002e-10)
_LN2_LOG_F = (0.6931381225585938, 9.058001351559417e-06)
_TWO_OVER_PI = 0.6366197723675814
_PIO2 = (1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33)
# atan(c) as hi + lo for the arctan breakpoints c = 0.5, 1, 1.5, inf (double, float)
_ATAN_HI = (0.4636476090008061, 0.7853981633974483, 0.982793723247329, 1.5707963267948966)
_ATAN_LO = (2.2698777452961687e-17, 3.061616997868383e-17, 1.3903311031230998e-17,
            6.123233995736766e-17)
_ATAN_HI_F = (0.46364760398864746, 0.7853981852531433, 0.9827937483787537, 1.5707963705062866)
_ATAN_LO_F = (5.01215868808913e-09, -2.1855694143368964e-08, -2.5131424052915463e-08,
              -4.371138828673793e-08)

# First 1300 bits of 2/pi (hex), used by the Payne-Hanek reduction.
_TWO_OVER_PI_HEX = (
    "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2"
    "e006492eea09d1921cfe1deb1cb129a73ee88235f52ebb4484e99c7026b45f7e413991d639835"
    "339f49c845f8bbdf9283b1ff897ffde05980fef2f118b5a0a6d1f6d367ecf27cb09b74f463f66"
    "9e5fea2d7527bac7ebe5f17b3d0739f78a5292ea6bfb5fb11f8d5d0856033046fc7b6babf0cfb"
    "c209af4361da9e39"
)
_CHUNK = 53  # bits of 2/pi per chunk: each chunk is an exact double


def _two_over_pi_chunks(count: int) -> list[int]:
    """Integer chunks: bits [53k, 53k+53) of 2/pi after the binary point."""
    nbits = 4 * len(_TWO_OVER_PI_HEX)
    assert count * _CHUNK <= nbits
    v = int(_TWO_OVER_PI_HEX, 16)  # floor(2/pi * 2^nbits)
    mask = (1 << _CHUNK) - 1
    return [(v >> (nbits - _CHUNK * (k + 1))) & mask for k in range(count)]


# ---------------------------------------------------------------------------
# Small IR helper bound to one floating-point type.
# ---------------------------------------------------------------------------
class _Ops:
    def __init__(self, builder: ir.IRBuilder, ty: ir.Type):
        self.b = builder
        self.ty = ty
        self.is64 = isinstance(ty, ir.DoubleType)
        self.ity = ir.IntType(64 if self.is64 else 32)
        self.mbits = 52 if self.is64 else 23  # explicit mantissa bits
        self.bias = 1023 if self.is64 else 127
        self.max_exp = 1023 if self.is64 else 127
        self.min_normal = 2.0 ** (1 - self.bias)

    # constants
    def c(self, v: float) -> ir.Constant:
        return ir.Constant(self.ty, float(v))

    def ic(self, v: int) -> ir.Constant:
        return ir.Constant(self.ity, int(v))

    # intrinsics
    def _intrinsic(self, name: str, nargs: int, *args):
        mod = self.b.module
        fnty = ir.FunctionType(self.ty, [self.ty] * nargs)
        fn = mod.declare_intrinsic(name, [self.ty], fnty=fnty)
        return self.b.call(fn, list(args))

    def fma(self, a, b, c):
        return self._intrinsic("llvm.fma", 3, a, b, c)

    def fabs(self, a):
        return self._intrinsic("llvm.fabs", 1, a)

    def rint(self, a):
        return self._intrinsic("llvm.rint", 1, a)

    def copysign(self, mag, sign):
        return self._intrinsic("llvm.copysign", 2, mag, sign)

    # arithmetic
    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    # comparisons (ordered: false if either side is NaN) and selection
    def lt(self, a, b):
        return self.b.fcmp_ordered("<", a, b)

    def ge(self, a, b):
        return self.b.fcmp_ordered(">=", a, b)

    def gt(self, a, b):
        return self.b.fcmp_ordered(">", a, b)

    def eq(self, a, b):
        return self.b.fcmp_ordered("==", a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def select(self, cond, a, b):
        return self.b.select(cond, a, b)

    # integer view of the bits
    def bits(self, a):
        return self.b.bitcast(a, self.ity)

    def from_bits(self, i):
        return self.b.bitcast(i, self.ty)

    def fptosi(self, a):
        return self.b.fptosi(a, self.ity)

    def sitofp(self, i):
        return self.b.sitofp(i, self.ty)

    # composite helpers
    def poly(self, x, coeffs):
        """Horner evaluation with fma, coefficients lowest degree first."""
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(k))
        return acc

    def poly2(self, x, cond, coeffs_true, coeffs_false):
        """Horner with per-lane coefficients: coeffs_true where cond else coeffs_false."""
        assert len(coeffs_true) == len(coeffs_false)
        pick = [self.select(cond, self.c(t), self.c(f)) for t, f in zip(coeffs_true, coeffs_false)]
        acc = pick[-1]
        for k in reversed(pick[:-1]):
            acc = self.fma(acc, x, k)
        return acc

    def clamp(self, x, lo, hi):
        """Clamp to [lo, hi]; NaN becomes lo (callers restore NaN at the end)."""
        x = self.select(self.gt(x, self.c(lo)), x, self.c(lo))
        return self.select(self.lt(x, self.c(hi)), x, self.c(hi))

    def keep_nan(self, x, y):
        """NaN in -> NaN out, whatever y computed for that lane."""
        return self.select(self.isnan(x), x, y)

    def pow2i(self, k):
        """2.0**k for an integer k in the normal exponent range (built in the bits)."""
        e = self.b.add(k, self.ic(self.bias))
        return self.from_bits(self.b.shl(e, self.ic(self.mbits)))

    def two_sum(self, a, b):
        """s + e == a + b exactly (Knuth's TwoSum, no magnitude precondition)."""
        s = self.add(a, b)
        bb = self.sub(s, a)
        e = self.add(self.sub(a, self.sub(s, bb)), self.sub(b, bb))
        return s, e

    def fast_two_sum(self, a, b):
        """s + e == a + b exactly, requires |a| >= |b| (or a == 0)."""
        s = self.add(a, b)
        return s, self.sub(b, self.sub(s, a))


# ---------------------------------------------------------------------------
# exp / expm1
# ---------------------------------------------------------------------------
def _exp_bounds(o: _Ops):
    # below lo the result is 0 (or -1 for expm1), above hi it is +inf; the
    # clamp keeps fptosi in range and the arithmetic then saturates by itself
    return (-746.0, 710.0) if o.is64 else (-104.0, 89.0)


def _exp_reduce(o: _Ops, x):
    """x = n ln2 + r with |r| <= ln2/2 (n returned as a float)."""
    hi, lo = _LN2_D if o.is64 else _LN2_F
    n = o.rint(o.mul(x, o.c(_LOG2E)))
    nn = o.neg(n)
    r = o.fma(nn, o.c(hi), x)  # exact: the result fits the format (Sterbenz-like)
    r = o.fma(nn, o.c(lo), r)
    return n, r


def _expm1_poly(o: _Ops, r, P: _Prec):
    """expm1(r) = r + r^2 q(r) for |r| <= ln2/2."""
    return o.fma(o.mul(r, r), o.poly(r, P.exp_q), r)


def _exp_core(o: _Ops, x, P: _Prec):
    """exp(x) for x already inside _exp_bounds (no NaN handling)."""
    n, r = _exp_reduce(o, x)
    p = o.add(o.c(1.0), _expm1_poly(o, r, P))
    # 2^n can leave the normal range (n in [-1076, 1024] for double), so scale
    # in two steps 2^(n>>1) * 2^(n - (n>>1)): each factor is normal, the first
    # product is exact and the second rounds once (inf on overflow, correctly
    # rounded subnormal or 0 on underflow).
    k = o.fptosi(n)
    k1 = o.b.ashr(k, o.ic(1))
    k2 = o.b.sub(k, k1)
    return o.mul(o.mul(p, o.pow2i(k1)), o.pow2i(k2))


def _exp(o: _Ops, x, P: _Prec):
    y = _exp_core(o, o.clamp(x, *_exp_bounds(o)), P)
    return o.keep_nan(x, y)


def _expm1(o: _Ops, x, P: _Prec):
    # below -(mantissa bits + 3) ln2 the result rounds to -1
    lo = -40.0 if o.is64 else -20.0
    xc = o.clamp(x, lo, _exp_bounds(o)[1])
    n, r = _exp_reduce(o, xc)
    p = _expm1_poly(o, r, P)
    k = o.fptosi(n)
    # 2^n overflows for n = max_exp + 1: use 2^(n-1) and double at the end
    top = o.b.icmp_signed(">", k, o.ic(o.max_exp))
    s = o.pow2i(o.select(top, o.b.sub(k, o.ic(1)), k))
    # 2^n (1 + p) - 1 = 2^n p + (2^n - 1); 2^n - 1 is exact for small |n|
    y = o.fma(s, p, o.sub(s, o.c(1.0)))
    y = o.select(top, o.mul(y, o.c(2.0)), y)
    y = o.select(o.eq(x, o.c(0.0)), x, y)  # expm1(-0) = -0
    return o.keep_nan(x, y)


# ---------------------------------------------------------------------------
# log / log1p
# ---------------------------------------------------------------------------
def _log_split(o: _Ops, x):
    """For x > 0 finite: (k, f) with x = 2^k (1 + f), 1 + f in [sqrt(1/2), sqrt(2))."""
    # subnormals: scale into the normal range first
    scale = o.mbits + 1
    tiny = o.lt(x, o.c(o.min_normal))
    xs = o.select(tiny, o.mul(x, o.c(2.0 ** scale)), x)
    kadj = o.select(tiny, o.c(-scale), o.c(0.0))
    # subtracting the bits of sqrt(1/2) moves the exponent boundary there, so
    # k = exponent of the difference and the mantissa is re-based on sqrt(1/2)
    sqrt_half = 0x3FE6A09E667F3BCD if o.is64 else 0x3F3504F3
    t = o.b.sub(o.bits(xs), o.ic(sqrt_half))
    k = o.b.ashr(t, o.ic(o.mbits))
    m_bits = o.b.add(o.b.and_(t, o.ic((1 << o.mbits) - 1)), o.ic(sqrt_half))
    f = o.sub(o.from_bits(m_bits), o.c(1.0))  # exact (Sterbenz)
    return o.add(o.sitofp(k), kadj), f


def _log_core(o: _Ops, k, f, corr, P: _Prec):
    """log(2^k (1 + f)) + corr, fdlibm formulation (corr is a tiny correction)."""
    hi, lo = _LN2_LOG if o.is64 else _LN2_LOG_F
    s = o.div(f, o.add(o.c(2.0), f))
    z = o.mul(s, s)
    r = o.mul(z, o.poly(z, P.log_l))
    hfsq = o.mul(o.mul(o.c(0.5), f), f)
    # f is exact and dominant; s only multiplies the small tail terms
    tail = o.fma(s, o.add(hfsq, r), o.fma(k, o.c(lo), corr))
    return o.fma(k, o.c(hi), o.sub(f, o.sub(hfsq, tail)))


def _log(o: _Ops, x, P: _Prec):
    k, f = _log_split(o, x)
    y = _log_core(o, k, f, o.c(0.0), P)
    y = o.select(o.eq(x, o.c(_INF)), o.c(_INF), y)
    y = o.select(o.eq(x, o.c(0.0)), o.c(-_INF), y)
    y = o.select(o.lt(x, o.c(0.0)), o.c(_NAN), y)
    return o.keep_nan(x, y)


def _log1p(o: _Ops, x, P: _Prec):
    u = o.add(o.c(1.0), x)
    # c = (1 + x) - u exactly (the rounding error of u); both forms are exact
    # in their range (Sterbenz), fdlibm's choice
    big = o.ge(u, o.c(2.0))
    c = o.select(big, o.sub(o.c(1.0), o.sub(u, x)), o.sub(x, o.sub(u, o.c(1.0))))
    k, f = _log_split(o, u)
    y = _log_core(o, k, f, o.div(c, u), P)  # log(1 + x) = log(u) + c/u
    y = o.select(o.eq(x, o.c(_INF)), o.c(_INF), y)
    y = o.select(o.eq(x, o.c(-1.0)), o.c(-_INF), y)
    y = o.select(o.lt(x, o.c(-1.0)), o.c(_NAN), y)
    y = o.select(o.eq(x, o.c(0.0)), x, y)  # log1p(-0) = -0
    return o.keep_nan(x, y)


# ---------------------------------------------------------------------------
# tanh / sigmoid
# ---------------------------------------------------------------------------
_TANH_SMALL = 0.55  # below: odd polynomial; above: no cancellation in 1 - 2/(e+1)
_TANH_SAT = 20.0  # tanh(x) rounds to +-1 well before this in double ...
_TANH_SAT_F = 10.0  # ... and in float


def _tanh(o: _Ops, x, P: _Prec):
    a = o.fabs(x)
    if P is _SINGLE:
        # float32 (native): tanh(a) = e/(e+2) with e = expm1(2a) >= 0 has no
        # cancellation anywhere; one reduction + one division (<= 2 ulp)
        a = o.select(o.lt(a, o.c(_TANH_SAT_F)), a, o.c(_TANH_SAT_F))
        n, r = _exp_reduce(o, o.mul(o.c(2.0), a))
        s = o.pow2i(o.fptosi(n))
        e = o.fma(s, _expm1_poly(o, r, P), o.sub(s, o.c(1.0)))
        y = o.div(e, o.add(e, o.c(2.0)))
    else:
        # float64: odd polynomial near 0, 1 - 2/(exp(2a) + 1) elsewhere
        z = o.mul(a, a)
        small = o.fma(o.mul(a, z), o.poly(z, P.tanh_t), a)
        a_sat = o.select(o.lt(a, o.c(_TANH_SAT)), a, o.c(_TANH_SAT))
        e = _exp_core(o, o.mul(o.c(2.0), a_sat), P)
        large = o.sub(o.c(1.0), o.div(o.c(2.0), o.add(e, o.c(1.0))))
        y = o.select(o.lt(a, o.c(_TANH_SMALL)), small, large)
    return o.keep_nan(x, o.copysign(y, x))  # copysign keeps tanh(-0) = -0


def _sigmoid(o: _Ops, x, P: _Prec):
    # e = exp(-|x|) never overflows; 1/(1+e) for x >= 0 and e/(1+e) for x < 0
    # are both free of cancellation and reach the subnormal range for x << 0
    lo = _exp_bounds(o)[0]
    a = o.fabs(x)
    e = _exp_core(o, o.select(o.gt(o.neg(a), o.c(lo)), o.neg(a), o.c(lo)), P)
    num = o.select(o.ge(x, o.c(0.0)), o.c(1.0), e)
    return o.keep_nan(x, o.div(num, o.add(o.c(1.0), e)))


# ---------------------------------------------------------------------------
# erf
# ---------------------------------------------------------------------------
_ERF_SMALL = 1.0  # below: odd polynomial; above: 1 - erfc
_ERF_MID = 2.0  # breakpoint between the two erfc pieces
_ERF_SAT = 6.0  # erf(x) rounds to 1 for x > 5.93 even in double
_ERFC_CENTERS = (0.75, 0.34375)  # expansion points in t = 1/x (exact in float too)


def _erf(o: _Ops, x, P: _Prec):
    a = o.fabs(x)
    a = o.select(o.lt(a, o.c(_ERF_SAT)), a, o.c(_ERF_SAT))  # NaN -> 6, fixed below
    z = o.mul(a, a)
    small = o.fma(a, o.poly(z, P.erf_f), a)  # a + a F(a^2): leading term exact
    # erfc(a) = exp(-a^2) g(1/a); a^2 = z + zlo exactly, exp(-zlo) ~ 1 - zlo
    t = o.div(o.c(1.0), a)
    first = o.lt(a, o.c(_ERF_MID))
    u = o.sub(t, o.select(first, o.c(_ERFC_CENTERS[0]), o.c(_ERFC_CENTERS[1])))
    g = o.poly2(u, first, P.erfc_g1, P.erfc_g2)
    zlo = o.fma(a, a, o.neg(z))
    e = _exp_core(o, o.neg(z), P)
    erfc = o.mul(e, o.fma(o.neg(g), zlo, g))
    large = o.sub(o.c(1.0), erfc)
    y = o.select(o.lt(a, o.c(_ERF_SMALL)), small, large)
    return o.keep_nan(x, o.copysign(y, x))


# ---------------------------------------------------------------------------
# arctan
# ---------------------------------------------------------------------------
def _arctan(o: _Ops, x, P: _Prec):
    a = o.fabs(x)
    # fdlibm ranges: [0,7/16) c=0, [7/16,11/16) c=1/2, [11/16,19/16) c=1,
    # [19/16,39/16) c=3/2, beyond: atan(a) = pi/2 + atan(-1/a)
    b0 = o.lt(a, o.c(7 / 16))
    b1 = o.lt(a, o.c(11 / 16))
    b2 = o.lt(a, o.c(19 / 16))
    b3 = o.lt(a, o.c(39 / 16))  # false for NaN -> NaN flows through -1/a

    def pick(v0, v1, v2, v3, v4):
        return o.select(b0, o.c(v0), o.select(b1, o.c(v1), o.select(
            b2, o.c(v2), o.select(b3, o.c(v3), o.c(v4)))))

    c = pick(0.0, 0.5, 1.0, 1.5, 0.0)
    num = o.select(b3, o.sub(a, c), o.c(-1.0))  # a - c is exact (Sterbenz)
    den = o.select(b3, o.fma(c, a, o.c(1.0)), a)
    t = o.div(num, den)  # |t| <= 7/16
    z = o.mul(t, t)
    p = o.mul(o.mul(t, z), o.poly(z, P.atan_a))  # atan(t) - t
    hi = pick(0.0, *(_ATAN_HI if o.is64 else _ATAN_HI_F))
    lo = pick(0.0, *(_ATAN_LO if o.is64 else _ATAN_LO_F))
    y = o.add(hi, o.add(t, o.add(p, lo)))
    return o.keep_nan(x, o.copysign(y, x))


_PI_HI, _PI_LO = math.pi, 1.2246467991473532e-16  # pi = _PI_HI + _PI_LO to ~2^-107


def _arctan2(o: _Ops, y, x, P: _Prec):
    """atan2(y, x) from the arctangent of the smaller magnitude over the
    larger (in [0, 1]): r, pi - r, pi/2 - r or pi/2 + r as x's sign and the
    larger part say (pi and pi/2 in two parts); atan2(+-0, +-0) is 0 or pi,
    both infinite pi/4 or 3pi/4, with y's sign."""
    a, b = o.fabs(y), o.fabs(x)
    steep = o.gt(a, b)
    inf = o.c(_INF)
    ratio = o.div(o.select(steep, b, a), o.select(steep, a, b))  # NaN for 0/0, inf/inf, and a NaN part
    ratio = o.select(o.b.and_(o.eq(a, o.c(0.0)), o.eq(b, o.c(0.0))), o.c(0.0), ratio)
    ratio = o.select(o.b.and_(o.eq(a, inf), o.eq(b, inf)), o.c(1.0), ratio)
    r = _arctan(o, ratio, P)
    negative_x = o.b.icmp_signed("<", o.bits(x), o.ic(0))  # (-0.0 too: atan2(0, -0) = pi)
    pio2_hi, pio2_lo = o.c(_PIO2[0]), o.c(_PIO2[1])
    steep_w = o.add(o.select(negative_x, o.add(pio2_hi, r), o.sub(pio2_hi, r)), pio2_lo)
    flat_w = o.select(negative_x, o.add(o.sub(o.c(_PI_HI), r), o.c(_PI_LO)), r)
    return o.copysign(o.select(steep, steep_w, flat_w), y)


def _hypot(o: _Ops, x, y, P: _Prec):
    a, b = o.fabs(x), o.fabs(y)
    m = o.select(o.gt(a, b), a, b)
    big, small = o.gt(m, o.c(2.0 ** 500)), o.lt(m, o.c(2.0 ** -500))
    down = o.select(big, o.c(2.0 ** -600), o.select(small, o.c(2.0 ** 600), o.c(1.0)))
    up = o.select(big, o.c(2.0 ** 600), o.select(small, o.c(2.0 ** -600), o.c(1.0)))
    sa, sb = o.mul(a, down), o.mul(b, down)  # (powers of two: exact)
    r = o.mul(o._intrinsic("llvm.sqrt", 1, o.fma(sa, sa, o.mul(sb, sb))), up)
    inf = o.c(_INF)
    return o.select(o.b.or_(o.eq(a, inf), o.eq(b, inf)), inf, r)


# ---------------------------------------------------------------------------
# sin / cos
# ---------------------------------------------------------------------------
_CW_LIMIT = 2.0 ** 30  # Cody-Waite reduction below, Payne-Hanek above (float64)


def _reduce_cody_waite(o: _Ops, a):
    """a = j pi/2 + (rh + rl), 0 <= a < 2^30: (rh, rl, j as integer)."""
    j = o.rint(o.mul(a, o.c(_TWO_OVER_PI)))
    nj = o.neg(j)
    p1, p2, p3 = _PIO2
    # exact: j*p1 is exact inside the fma and the difference fits 53 bits
    r1 = o.fma(nj, o.c(p1), a)
    # subtract j*p2 (formed exactly as ph + pl) keeping the rounding error
    ph = o.mul(j, o.c(p2))
    pl = o.fma(j, o.c(p2), o.neg(ph))
    rh, e = o.two_sum(r1, o.neg(ph))
    rl = o.fma(nj, o.c(p3), o.sub(e, pl))
    rh, rl = o.fast_two_sum(rh, rl)
    return rh, rl, o.fptosi(j)


def _reduce_payne_hanek(o: _Ops, a, in_bits: int, in_max_exp: int, want_lo: bool):
    """a * 2/pi = n + F with |F| <= ~1/2 for any finite a >= 0 that has at most
    ``in_bits`` significant bits; returns (rh, rl, n) with rh + rl = F pi/2
    (rl is None unless ``want_lo``).

    a = M 2^(E+1-in_bits).  With C_k the k-th 53-bit chunk of 2/pi, a*C_k is a
    multiple of 4 (irrelevant mod 4) for k < k0 = floor((E-in_bits-1)/53), so
    only the chunks k0, k0+1, ... are needed; the exponent selects them with
    selects (no table loads).  Every product is split exactly with
    fma into hi + lo, terms that can be huge are reduced mod 4 exactly, and the
    sum is carried as a double-double (TwoSum is error-free, only the small
    error word is rounded).
    """
    W = _CHUNK
    # largest chunk offset k0 the exponent can select
    kmax = max(0, (in_max_exp - in_bits - 1) // W)
    # log2 of the absolute accuracy wanted for F: the worst float32 / float64
    # arguments come within ~2^-32 / ~2^-62 of a multiple of pi/2
    target = -104 if in_bits > 24 else -75
    # a * C_(k0+j) < 2^(in_bits + 2 - 53 (j - 1)): chunks below target are dropped
    nchunks = 0
    while in_bits + 2 - W * (nchunks - 1) > target:
        nchunks += 1

    # k0 = floor(max(E - in_bits - 1, 0) / 53) (multiply-shift, exact for E < 2600)
    ib = o.bits(a)
    e = o.b.sub(o.b.and_(o.b.lshr(ib, o.ic(52)), o.ic(0x7FF)), o.ic(1023 + in_bits + 1))
    e = o.select(o.b.icmp_signed(">", e, o.ic(0)), e, o.ic(0))
    k0 = o.b.lshr(o.b.mul(e, o.ic(1237)), o.ic(16))
    # The chunks C_(k0+j) are picked with selects (no table loads) in two
    # levels to keep the number of selects low: k0 = G u + v; level 1 picks by
    # u the G + nchunks - 1 candidate chunks, level 2 picks by v among them.
    G = 4
    umax = kmax // G
    u = o.b.lshr(k0, o.ic(2))  # G = 4
    v = o.b.and_(k0, o.ic(G - 1))
    u_ge = [o.b.icmp_signed(">=", u, o.ic(i)) for i in range(1, umax + 1)]
    v_ge = [o.b.icmp_signed(">=", v, o.ic(i)) for i in range(1, min(G - 1, kmax) + 1)]

    def chain(values, conds):  # values[i] for the largest i with conds[i-1] true
        out = values[0]
        for cond, val in zip(conds, values[1:]):
            out = o.select(cond, val, out)
        return out

    chunks = _two_over_pi_chunks(G * umax + len(v_ge) + nchunks)
    # Chunks deep inside 2/pi would underflow as doubles, so the products are
    # formed as (a 2^(-53 G u)) * (C_(k0+j) 2^(53 G u)); both scalings are
    # exact, and the second factor is the chunk's integer times 2^(-53 (v+j+1)).
    if umax:
        a = o.mul(a, o.pow2i(o.b.mul(u, o.ic(-W * G))))
    cand = [chain([o.c(math.ldexp(chunks[G * uu + m], -W * (m + 1))) for uu in range(umax + 1)], u_ge)
            for m in range(len(v_ge) + nchunks)]

    def mod4(v):  # exact: v - 4 rint(v/4), in [-2, 2]
        return o.fma(o.c(-4.0), o.rint(o.mul(v, o.c(0.25))), v)

    terms = []  # (value, log2 bound of |value|) in decreasing significance
    for j in range(nchunks):
        cj = chain(cand[j:j + len(v_ge) + 1], v_ge)
        bound = in_bits + 2 - W * (j - 1)
        hi = o.mul(a, cj)
        terms.append((hi, bound))
        if bound - 53 > target:
            terms.append((o.fma(a, cj, o.neg(hi)), bound - 53))  # exact low part
    s, err = None, o.c(0.0)
    for t, bound in terms:
        # the error word ends up ~2^-52 |s|: keep |s| small enough for target
        if bound > target + 106:
            t = mod4(t)
        if s is None:
            s = t
        elif bound > target + 53:  # exact accumulation
            s, e2 = o.two_sum(s, t)
            err = o.add(err, e2)
        else:  # small enough to round into the error word
            err = o.add(err, t)
    n = o.rint(s)
    s = o.sub(s, n)  # exact
    p1, p2, _ = _PIO2
    if not want_lo:
        return o.mul(o.add(s, err), o.c(p1)), None, o.fptosi(n)
    f_hi, f_lo = o.two_sum(s, err)
    # (f_hi + f_lo) * pi/2 in double-double
    rh = o.mul(f_hi, o.c(p1))
    rl = o.fma(f_hi, o.c(p1), o.neg(rh))
    rl = o.add(rl, o.fma(f_hi, o.c(p2), o.mul(f_lo, o.c(p1))))
    rh, rl = o.fast_two_sum(rh, rl)
    return rh, rl, o.fptosi(n)


def _sin_kernel(o: _Ops, rh, rl, z, P: _Prec):
    """sin(rh + rl), |rh| <= ~pi/4, z = rh^2 (rl None: no tail)."""
    if rl is None:
        return o.fma(o.mul(rh, z), o.poly(z, P.sin_s), rh)
    tail = o.fma(o.mul(rh, z), o.poly(z, P.sin_s), o.mul(rl, o.fma(o.c(-0.5), z, o.c(1.0))))
    return o.add(rh, tail)


def _cos_kernel(o: _Ops, rh, rl, z, P: _Prec):
    """cos(rh + rl) = 1 - z/2 + z^2 C(z) - rh rl (rl None: no tail)."""
    hz = o.mul(o.c(0.5), z)
    w = o.sub(o.c(1.0), hz)
    if rl is None:  # float32 result computed in double: no compensation needed
        return o.fma(o.mul(z, z), o.poly(z, P.cos_c), w)
    # 1 - hz is compensated: ((1 - w) - hz) is its exact rounding error
    tail = o.fma(o.mul(z, z), o.poly(z, P.cos_c), o.neg(o.mul(rh, rl)))
    return o.add(w, o.add(o.sub(o.sub(o.c(1.0), w), hz), tail))


def _sincos(o: _Ops, x, P: _Prec, cosine: bool):
    assert o.is64, "sin/cos are always evaluated in double"
    finite = o.lt(o.fabs(x), o.c(_INF))  # false for inf and NaN
    a = o.select(finite, o.fabs(x), o.c(0.0))  # keep non-finite lanes harmless
    double = P is _DOUBLE
    rh, rl, q = _reduce_payne_hanek(o, a, P.in_bits, P.in_max_exp, want_lo=double)
    if double:  # cheap exact reduction below 2^30
        small = o.lt(a, o.c(_CW_LIMIT))
        rh2, rl2, q2 = _reduce_cody_waite(o, o.select(small, a, o.c(0.0)))
        rh = o.select(small, rh2, rh)
        rl = o.select(small, rl2, rl)
        q = o.select(small, q2, q)
    z = o.mul(rh, rh)
    s = _sin_kernel(o, rh, rl, z, P)
    c = _cos_kernel(o, rh, rl, z, P)
    if cosine:
        q = o.b.add(q, o.ic(1))  # cos(x) = sin(x + pi/2)
    odd = o.b.icmp_signed("!=", o.b.and_(q, o.ic(1)), o.ic(0))
    negate = o.b.icmp_signed("!=", o.b.and_(q, o.ic(2)), o.ic(0))
    v = o.select(odd, c, s)
    v = o.select(negate, o.neg(v), v)
    if not cosine:  # sin is odd: flip the sign bit with x's (keeps sin(-0) = -0)
        sign = o.b.and_(o.bits(x), o.ic(-(1 << 63)))
        v = o.from_bits(o.b.xor(o.bits(v), sign))
    return o.select(finite, v, o.c(_NAN))


def _sin(o, x, P):
    return _sincos(o, x, P, cosine=False)


def _cos(o, x, P):
    return _sincos(o, x, P, cosine=True)


_IMPLS = {
    "exp": _exp,
    "expm1": _expm1,
    "log": _log,
    "log1p": _log1p,
    "tanh": _tanh,
    "sigmoid": _sigmoid,
    "erf": _erf,
    "sin": _sin,
    "cos": _cos,
    "arctan": _arctan,
    "arctan2": _arctan2,
    "hypot": _hypot,
}
assert set(_IMPLS) == SUPPORTED


def emit(builder: ir.IRBuilder, name: str, args: list[ir.Value]) -> ir.Value:
    """Emit ``name(*args)`` at the builder's position and return the value.

    ``args`` holds one ``float`` or ``double`` value (two of the same type
    for the names in ``BINARY``); the result has the same type.  The emitted
    code is branch-free (suitable for a vectorizable loop body) and calls no
    library function.
    """
    if name not in SUPPORTED:
        raise ValueError(f"unsupported math function {name!r}; supported: {sorted(SUPPORTED)}")
    arity = 2 if name in BINARY else 1
    if len(args) != arity:
        raise TypeError(f"{name} takes exactly {arity} argument(s), got {len(args)}")
    ty = args[0].type
    if any(a.type != ty for a in args):
        raise TypeError(f"{name}: arguments of different types")
    impl = _IMPLS[name]
    if isinstance(ty, ir.DoubleType):
        return impl(_Ops(builder, ty), *args, _DOUBLE)
    if isinstance(ty, ir.FloatType):
        if name not in _F32_VIA_DOUBLE:
            return impl(_Ops(builder, ty), *args, _SINGLE)
        # evaluate in double, round once (sin/cos with single-precision
        # polynomials; arctan2 and hypot in full double precision)
        dty = ir.DoubleType()
        y = impl(_Ops(builder, dty), *(builder.fpext(a, dty) for a in args),
                 _SINGLE if name not in BINARY else _DOUBLE)
        return builder.fptrunc(y, ty)
    raise TypeError(f"{name}: expected a float or double value, got {ty}")

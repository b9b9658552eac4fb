"""Codegen's emitter table: the LLVM code of each op a fused kernel computes.

`EMITTERS[op](b, m, xs)` returns the value of an elementwise op from its
operands `xs`, already cast to the dtype the op computes in (shapes/ops.py
COMPUTE: the result's, the comparison's promotion, bool, the operand's;
where's condition as bool).  Integer and bool operands (LLVM integer types)
get numpy's integer semantics, floats IEEE arithmetic with numpy's NaN rules.
power's exponent arrives as the Python number the partition checked.

`REDUCERS[op](b, m, acc, x, flags)` combines a reduction's accumulator with
one more element of the result's type.

The ops here are exactly the ones the registry says a kernel computes
(shapes/ops.py KERNEL_KINDS); tests/test_fusion.py checks that, so an op
cannot be half-added.
"""
from __future__ import annotations

import numpy as np

from llvmlite import ir

from codegen import mathlib
from shapes.ops import OPS

I1 = ir.IntType(1)
# the ops mathlib emits (dozens of instructions an element: worth keeping a result rather than recomputing)
MATH = frozenset(name for name in mathlib.SUPPORTED if name in OPS)


def intrinsic(m: ir.Module, name: str, t, nargs: int):
    return m.declare_intrinsic(name, [t], ir.FunctionType(t, [t] * nargs))


def _is_int(x) -> bool:
    return isinstance(x.type, ir.IntType)


# ------------------------------------------------------------ integers
# numpy's integer semantics: arithmetic wraps around; x // 0 and x % 0 are 0;
# floor division rounds toward -inf and the remainder takes the divisor's
# sign; INT_MIN // -1 wraps to INT_MIN (the hardware division would trap, so
# divisors 0 and -1 never reach it).

def _idiv(b: ir.IRBuilder, x, y, want_remainder: bool):
    zero, one = ir.Constant(x.type, 0), ir.Constant(x.type, 1)
    minus_one = ir.Constant(x.type, -1)
    special = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, minus_one))
    safe = b.select(special, one, y)
    q, r = b.sdiv(x, safe), b.srem(x, safe)
    adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("!=", b.icmp_signed("<", r, zero),
                                                                 b.icmp_signed("<", y, zero)))
    if want_remainder:
        r = b.select(adjust, b.add(r, y), r)
        return b.select(special, zero, r)                           # x % -1 == 0, x % 0 == 0
    q = b.select(adjust, b.sub(q, one), q)
    neg = b.sub(zero, x)                                            # x // -1 == -x (wrapping)
    return b.select(b.icmp_signed("==", y, zero), zero, b.select(b.icmp_signed("==", y, minus_one), neg, q))


def _fdivmod(b, m, x, y, want: str):
    """numpy's npy_divmod of floats (floor division and Python's remainder
    from fmod, the quotient snapped to an integer) and its cases for a zero
    divisor (x / y, and fmod's NaN); want: "floor_divide" or "remainder"."""
    t = x.type
    zero, one, half = ir.Constant(t, 0.0), ir.Constant(t, 1.0), ir.Constant(t, 0.5)
    copysign, floor = intrinsic(m, "llvm.copysign", t, 2), intrinsic(m, "llvm.floor", t, 1)
    mod = b.frem(x, y)  # (C's fmod)
    div = b.fdiv(b.fsub(x, mod), y)
    flip = b.and_(b.fcmp_unordered("!=", mod, zero), b.icmp_unsigned(
        "!=", b.fcmp_ordered("<", y, zero), b.fcmp_ordered("<", mod, zero)))
    mod_adj = b.select(flip, b.fadd(mod, y), mod)
    div = b.select(flip, b.fsub(div, one), div)
    mod_adj = b.select(b.fcmp_unordered("!=", mod, zero), mod_adj, b.call(copysign, [zero, y]))
    if want == "remainder":
        return b.select(b.fcmp_ordered("==", y, zero), mod, mod_adj)
    fl = b.call(floor, [div])
    fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), half), b.fadd(fl, one), fl)
    quotient = b.fdiv(x, y)
    fl = b.select(b.fcmp_unordered("!=", div, zero), fl, b.call(copysign, [zero, quotient]))
    return b.select(b.fcmp_ordered("==", y, zero), quotient, fl)


def _fmod(b, m, x, y):
    """C's fmod; of ints the truncated remainder, 0 for a zero divisor (and
    for -1: INT_MIN % -1 would trap)."""
    if not _is_int(x):
        return b.frem(x, y)
    zero = ir.Constant(x.type, 0)
    special = b.or_(b.icmp_signed("==", y, zero), b.icmp_signed("==", y, ir.Constant(x.type, -1)))
    return b.select(special, zero, b.srem(x, b.select(special, ir.Constant(x.type, 1), y)))


def _pick(pred: str):
    """numpy's maximum (pred ">") or minimum ("<"): ints by compare; floats
    x where x beats y, else y (a tie, +0.0 and -0.0, gives y, as numpy's
    float32 and float64 loops do: maximum(+0.0, -0.0) is -0.0; x86's maxps),
    then a NaN x kept (a NaN propagates).  With the operands swapped, a tie
    keeps x: TIE_FIRST."""
    def pick(b, m, x, y):
        if _is_int(x):
            return b.select(b.icmp_signed(pred + "=", x, y), x, y)
        picked = b.select(b.fcmp_ordered(pred, x, y), x, y)
        return b.select(b.fcmp_unordered("uno", x, x), x, picked)
    return pick


_max, _min = _pick(">"), _pick("<")


def _max_reduced(b, m, x, y):
    """A maximum reduction's step: llvm.maximum (NaN propagates, as numpy's),
    as before.  Which of two equal zeros numpy's max reduction returns
    follows its SIMD order; that is not matched."""
    if _is_int(x):
        return b.select(b.icmp_signed(">", y, x), y, x)
    return b.call(intrinsic(m, "llvm.maximum", x.type, 2), [x, y])


def _min_reduced(b, m, x, y):
    if _is_int(x):
        return b.select(b.icmp_signed("<", y, x), y, x)
    return b.call(intrinsic(m, "llvm.minimum", x.type, 2), [x, y])


def _sign(b, m, x):
    if _is_int(x):
        zero = ir.Constant(x.type, 0)
        return b.sub(b.zext(b.icmp_signed(">", x, zero), x.type), b.zext(b.icmp_signed("<", x, zero), x.type))
    one, zero = ir.Constant(x.type, 1.0), ir.Constant(x.type, 0.0)
    r = b.select(b.fcmp_ordered("==", x, x), zero, x)  # NaN stays NaN; -0 -> +0
    r = b.select(b.fcmp_ordered("<", x, zero), ir.Constant(x.type, -1.0), r)
    return b.select(b.fcmp_ordered(">", x, zero), one, r)


def _absolute(b, m, x):
    if _is_int(x):
        zero = ir.Constant(x.type, 0)
        return b.select(b.icmp_signed("<", x, zero), b.sub(zero, x), x)
    return b.call(intrinsic(m, "llvm.fabs", x.type, 1), [x])


def _power(b, m, x, e):
    mul = b.mul if _is_int(x) else b.fmul
    if e == 1:
        return x
    if e == 2:
        return mul(x, x)
    if e == 3:
        return mul(mul(x, x), x)
    if e == 4:
        x2 = mul(x, x)
        return mul(x2, x2)
    if e == 0.5:  # (numpy's own fast path: np.sqrt)
        return b.call(intrinsic(m, "llvm.sqrt", x.type, 1), [x])
    one = ir.Constant(x.type, 1.0)
    # (a negative exponent: the reciprocal first, (1 / x)**k -- 1 / x**k made 1e155 ** -2 0 where C's pow gives
    # the subnormal 1e-310, x**k past the largest float -- with C's pow's signed zeros and infinities)
    if e in (-1, -2, -3):
        return _power(b, m, b.fdiv(one, x), -e)
    if e * 2 % 2 == 1 and abs(e) <= 3.5:
        # a half-integer: |x|**k * sqrt(|x|) (of 1 / |x| below -1; -0.5's the
        # reciprocal of sqrt(|x|), whose 1 / |x| of a subnormal x is past the
        # largest float), a few ulp from C's pow; NaN below zero except at
        # -inf, whose pow is inf (or 0)
        ax = b.call(intrinsic(m, "llvm.fabs", x.type, 1), [x])
        if e < -1:
            ax = b.fdiv(one, ax)
        k = int(abs(e) - 0.5)
        r = b.call(intrinsic(m, "llvm.sqrt", x.type, 1), [ax])
        if k:
            r = b.fmul(_power(b, m, ax, k), r)
        if e == -0.5:
            r = b.fdiv(one, r)
        neg = b.and_(b.fcmp_ordered("<", x, ir.Constant(x.type, 0.0)),
                     b.fcmp_ordered("!=", x, ir.Constant(x.type, float("-inf"))))
        return b.select(neg, ir.Constant(x.type, float("nan")), r)
    raise NotImplementedError(f"power with exponent {e}")


def _arith(int_op: str, float_op: str):
    def emit(b, m, x, y):
        return getattr(b, int_op)(x, y) if _is_int(x) else getattr(b, float_op)(x, y)
    return emit


def _compare(pred: str):
    def emit(b, m, x, y):
        if x.type == I1:
            return b.icmp_unsigned(pred, x, y)
        if _is_int(x):
            return b.icmp_signed(pred, x, y)
        # (x != NaN is true: the unordered predicate; the others are false for NaN)
        return b.fcmp_unordered(pred, x, y) if pred == "!=" else b.fcmp_ordered(pred, x, y)
    return emit


def _float_intrinsic(name: str):
    def emit(b, m, *xs):
        return b.call(intrinsic(m, name, xs[0].type, len(xs)), list(xs))
    return emit


def _math(name: str):
    def emit(b, m, *xs):
        return mathlib.emit(b, name, list(xs))
    return emit


def _isinf_or_finite(pred: str):
    def emit(b, m, x):
        ax = b.call(intrinsic(m, "llvm.fabs", x.type, 1), [x])
        return b.fcmp_ordered(pred, ax, ir.Constant(x.type, float("inf")))
    return emit


def _signbit(b, m, x):
    bits = ir.IntType(32 if x.type == ir.FloatType() else 64)
    return b.icmp_signed("<", b.bitcast(x, bits), ir.Constant(bits, 0))


def _negative(b, m, x):
    return b.sub(ir.Constant(x.type, 0), x) if _is_int(x) else b.fneg(x)


def _invert(b, m, x):
    return b.xor(x, ir.Constant(x.type, -1 if x.type != I1 else 1))


def _shift(left: bool, arithmetic: bool):
    """numpy's shifts: a count past the width (or negative: a huge unsigned
    count) shifts everything out, leaving 0, or -1 for a negative value
    shifted right."""
    def emit(b, m, x, y):
        width = ir.Constant(x.type, x.type.width)
        inside = b.icmp_unsigned("<", y, width)
        count = b.select(inside, y, ir.Constant(x.type, 0))
        if left:
            return b.select(inside, b.shl(x, count), ir.Constant(x.type, 0))
        if not arithmetic:
            return b.select(inside, b.lshr(x, count), ir.Constant(x.type, 0))
        out = b.select(b.icmp_signed("<", x, ir.Constant(x.type, 0)), ir.Constant(x.type, -1),
                       ir.Constant(x.type, 0))
        return b.select(inside, b.ashr(x, count), out)
    return emit


def _scaled(num: float, den: float):
    """x * (num / den), the factor as numpy's loop computes it: in double, or
    in float for float32 (and float16, computed in float): rad2deg, deg2rad."""
    def emit(b, m, x):
        double = isinstance(x.type, ir.DoubleType)
        factor = num / den if double else float(np.float32(num) / np.float32(den))
        return b.fmul(x, ir.Constant(x.type, factor))
    return emit


EMITTERS = {
    "rad2deg": _scaled(180.0, np.pi), "deg2rad": _scaled(np.pi, 180.0),
    "add": _arith("add", "fadd"), "subtract": _arith("sub", "fsub"), "multiply": _arith("mul", "fmul"),
    "divide": lambda b, m, x, y: b.fdiv(x, y),
    "floor_divide": lambda b, m, x, y: (_idiv(b, x, y, False) if _is_int(x) else
                                        _fdivmod(b, m, x, y, "floor_divide")),
    "remainder": lambda b, m, x, y: _idiv(b, x, y, True) if _is_int(x) else _fdivmod(b, m, x, y, "remainder"),
    "fmod": _fmod,
    "maximum": _max, "minimum": _min,
    "clip": lambda b, m, x, lo, hi: _min(b, m, _max(b, m, x, lo), hi),
    "power": _power,
    "negative": _negative, "positive": lambda b, m, x: x, "conjugate": lambda b, m, x: x,
    "square": lambda b, m, x: (b.mul if _is_int(x) else b.fmul)(x, x),
    "reciprocal": lambda b, m, x: b.fdiv(ir.Constant(x.type, 1.0), x),
    "absolute": _absolute, "fabs": _float_intrinsic("llvm.fabs"), "sign": _sign,
    "sqrt": _float_intrinsic("llvm.sqrt"), "floor": _float_intrinsic("llvm.floor"),
    "ceil": _float_intrinsic("llvm.ceil"), "trunc": _float_intrinsic("llvm.trunc"),
    "rint": _float_intrinsic("llvm.rint"),
    **{name: _math(name) for name in MATH},
    "bitwise_and": lambda b, m, x, y: b.and_(x, y), "bitwise_or": lambda b, m, x, y: b.or_(x, y),
    "bitwise_xor": lambda b, m, x, y: b.xor(x, y), "invert": _invert,
    "left_shift": _shift(True, True), "right_shift": _shift(False, True),
    "logical_and": lambda b, m, x, y: b.and_(x, y), "logical_or": lambda b, m, x, y: b.or_(x, y),
    "logical_xor": lambda b, m, x, y: b.xor(x, y), "logical_not": lambda b, m, x: b.xor(x, ir.Constant(I1, 1)),
    "isnan": lambda b, m, x: b.fcmp_unordered("uno", x, x),
    "isinf": _isinf_or_finite("=="), "isfinite": _isinf_or_finite("<"), "signbit": _signbit,
    "equal": _compare("=="), "not_equal": _compare("!="), "less": _compare("<"),
    "less_equal": _compare("<="), "greater": _compare(">"), "greater_equal": _compare(">="),
    "where": lambda b, m, c, x, y: b.select(c, x, y),
    "astype": lambda b, m, x: x,  # (the cast to the result's dtype is the whole op)
}


# float ops whose tie (+0.0 against -0.0) keeps the first operand: in numpy's
# float16 loops, and in its clip where both bounds are one value (tie="first")
# (the pick of y and x: a tie gives x; a NaN y is kept first, then a NaN x, as numpy's)
TIE_FIRST = {
    "maximum": lambda b, m, x, y: _max(b, m, y, x), "minimum": lambda b, m, x, y: _min(b, m, y, x),
    "clip": lambda b, m, x, lo, hi: _min(b, m, hi, _max(b, m, lo, x)),
}

# unsigned integers (uint8..uint64): the ops whose signed emitter differs;
# values.py takes these when the op computes in an unsigned dtype
def _udiv(b, x, y, want_remainder: bool):
    zero = ir.Constant(x.type, 0)
    is_zero = b.icmp_unsigned("==", y, zero)
    safe = b.select(is_zero, ir.Constant(x.type, 1), y)
    r = b.urem(x, safe) if want_remainder else b.udiv(x, safe)
    return b.select(is_zero, zero, r)  # (x // 0 and x % 0 are 0, as numpy's)


def _ucompare(pred: str):
    return lambda b, m, x, y: b.icmp_unsigned(pred, x, y)


def _umax(b, m, x, y):
    return b.select(b.icmp_unsigned(">=", x, y), x, y)


def _umin(b, m, x, y):
    return b.select(b.icmp_unsigned("<=", x, y), x, y)


UNSIGNED = {
    "floor_divide": lambda b, m, x, y: _udiv(b, x, y, False),
    "remainder": lambda b, m, x, y: _udiv(b, x, y, True),
    "fmod": lambda b, m, x, y: _udiv(b, x, y, True),
    "maximum": _umax, "minimum": _umin,
    "clip": lambda b, m, x, lo, hi: _umin(b, m, _umax(b, m, x, lo), hi),
    "absolute": lambda b, m, x: x,
    "sign": lambda b, m, x: b.zext(b.icmp_unsigned("!=", x, ir.Constant(x.type, 0)), x.type),
    "right_shift": _shift(False, False),
    **{op: _ucompare(pred) for op, pred in (("equal", "=="), ("not_equal", "!="), ("less", "<"),
                                            ("less_equal", "<="), ("greater", ">"), ("greater_equal", ">="))},
}


def _reducer(int_op: str, float_op: str):
    def combine(b, m, acc, x, flags):
        return getattr(b, int_op)(acc, x) if _is_int(x) else getattr(b, float_op)(acc, x, flags=flags)
    return combine


def _replaces(pred: str):
    """argmax's and argmin's step: whether x takes the best's place (ints
    and bools arrive as int64): strictly beyond it, so the first extreme
    wins, or the first NaN (numpy's argmax and argmin stop at a NaN)."""
    def replaces(b, m, best, x, flags):
        if _is_int(x):
            return b.icmp_signed(pred, x, best)
        first_nan = b.and_(b.fcmp_unordered("uno", x, x), b.fcmp_ordered("ord", best, best))
        return b.or_(b.fcmp_ordered(pred, x, best), first_nan)
    return replaces


# ints and bools arrive cast to the result's dtype, added or multiplied with
# wraparound; floats by fadd/fmul (with the kernel's fast-math flags) or
# llvm.maximum/minimum (NaN propagates, as in numpy); argmax and argmin say
# whether x replaces the best (codegen/schedule.py _arg_pass)
REDUCERS = {
    "sum": _reducer("add", "fadd"), "prod": _reducer("mul", "fmul"),
    "argmax": _replaces(">"), "argmin": _replaces("<"),
    "max": lambda b, m, acc, x, flags: _max_reduced(b, m, acc, x),
    "min": lambda b, m, acc, x, flags: _min_reduced(b, m, acc, x),
}
UNSIGNED_REDUCERS = {
    "max": lambda b, m, acc, x, flags: _umax(b, m, x, acc),
    "min": lambda b, m, acc, x, flags: _umin(b, m, x, acc),
}

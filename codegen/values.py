"""The LLVM value of each member of a fused kernel, an element at a time.

In: a kernel's member nodes, its folded constants and scalar arguments,
its arrays (codegen/access.py) and, from the schedule (codegen/schedule.py),
where the current row of each input starts.  Out: `ValueEmitter.value(v,
j)`, v's element at column j: an input loaded, a constant or scalar, or a
node computed from its operands, each cast to the dtype the op computes in
(shapes/ops.py COMPUTE) and handed to its emitter (codegen/emitters.py).
Also what reductions need: identities, the combine step, float sums added
up in blocks with compensation, and a row's reciprocals of the divisors it
divides by.  The casts and constants serve re-rolled loops too
(codegen/loops.py).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from clustering.partition import compare_dtype
from codegen import complexval
from codegen.abi import F16, F32, F64, HALF, I1, I8, I32, I64, LLTYPE
from codegen.access import Arrays
from codegen.complexval import CValue
from codegen.emitters import EMITTERS, REDUCERS, TIE_FIRST, UNSIGNED, UNSIGNED_REDUCERS, intrinsic
from codegen.llvm import for_range
from shapes.ir import Node, Value
from shapes.ops import OPS

REASSOC = ("reassoc", "nsz")


def operand_dtypes(n: Node) -> list:
    """The dtype each operand of elementwise node n is cast to before its
    emitter runs: the one the op computes in (shapes/ops.py COMPUTE)."""
    how, out = OPS[n.op].compute, n.out.dtype
    if n.op in ("absolute", "real", "imag") and n.inputs[0].dtype.kind == "c":  # (a float of a complex)
        return [n.inputs[0].dtype]
    if n.op == "complex_of":  # (its parts, in the parts' dtype)
        return [complexval.part_dtype(out)] * 2
    if how == "select":
        return [np.dtype(np.bool_), out, out]
    ctype = (compare_dtype(n.inputs) if how == "promoted" else np.dtype(np.bool_) if how == "bool"
             else n.inputs[0].dtype if how == "operand" else out)
    return [ctype] * len(n.inputs)


def cast(b: ir.IRBuilder, x, src: np.dtype, dst: np.dtype):
    """x (an LLVM value of dtype src) as dtype dst, as numpy's astype (float
    to int and complex to a real dtype are not compiled)."""
    if src == dst:
        return x
    if src == HALF:  # (a float16 is computed as a float32 holding its value)
        return cast(b, x, np.dtype(np.float32), dst)
    if dst == HALF:  # (rounded once to float16, as numpy's casts round)
        if src == np.bool_ or src.kind == "u":  # (an int is exact in float32 up to 2**24, far past float16's
            return round_half(b, b.uitofp(x, F32))  # largest, 65504: beyond, both give inf)
        if src.kind == "i":
            return round_half(b, b.sitofp(x, F32))
        return round_half(b, _to_float_odd(b, x) if src == np.float64 else x)
    if dst.kind == "c":  # (a real: its value and a zero imaginary part)
        part = complexval.part_dtype(dst)
        if src.kind == "c":
            have = complexval.part_dtype(src)
            return CValue(cast(b, x.re, have, part), cast(b, x.im, have, part))
        return CValue(cast(b, x, src, part), ir.Constant(LLTYPE[part], 0.0))
    if src.kind == "c":  # (to bool: either part nonzero; NaN is nonzero)
        zero = ir.Constant(x.type, 0.0)
        return b.or_(b.fcmp_unordered("!=", x.re, zero), b.fcmp_unordered("!=", x.im, zero))
    t = LLTYPE[dst]
    if dst == np.bool_:
        if src.kind == "f":
            return b.fcmp_unordered("!=", x, ir.Constant(x.type, 0.0))
        return b.icmp_unsigned("!=", x, ir.Constant(x.type, 0))
    if dst.kind in "iu":  # (from bool or a narrower/wider int, its sign kept: float to int is not compiled)
        if src == np.bool_:
            return b.zext(x, t)
        if src.itemsize == dst.itemsize:
            return x
        if src.itemsize > dst.itemsize:
            return b.trunc(x, t)
        return b.sext(x, t) if src.kind == "i" else b.zext(x, t)
    if src == np.bool_ or src.kind == "u":
        return b.uitofp(x, t)
    if src.kind == "i":
        return b.sitofp(x, t)
    return b.fpext(x, t) if src.itemsize < dst.itemsize else b.fptrunc(x, t)


def const_dtype(c) -> np.dtype:
    """The dtype a folded constant is emitted in: its own for numpy scalars,
    int64/float64/bool for Python scalars (cast at use, as NEP 50 does)."""
    if isinstance(c, np.generic):
        return c.dtype
    if isinstance(c, bool):
        return np.dtype(np.bool_)
    if isinstance(c, complex):
        return np.dtype(np.complex128)
    return np.dtype(np.int64) if isinstance(c, int) else np.dtype(np.float64)


def const(dt: np.dtype, c):
    """The LLVM constant of scalar c in dtype dt."""
    if dt == np.bool_:
        return ir.Constant(I1, int(bool(c)))
    if dt.kind == "c":
        return complexval.const(dt, c)
    if dt.kind in "iu":
        return ir.Constant(LLTYPE.get(dt, I64), int(c))
    if dt == HALF:
        return ir.Constant(F32, float(np.float16(c)))
    return ir.Constant(LLTYPE.get(dt, F64), float(c))


def _to_float_odd(b: ir.IRBuilder, x):
    """A float64 as the float32 rounded to odd (toward zero, its last bit
    set when inexact): rounding that to float16 rounds x once, where
    rounding to the nearest float32 first could round twice (float32 has
    more than float16's 11 bits plus two).  LLVM would call compiler-rt's
    __truncdfhf2 for a double to half, which the process does not have."""
    t = b.fptrunc(x, F32)
    fabs32, fabs64 = intrinsic(b.module, "llvm.fabs", F32, 1), intrinsic(b.module, "llvm.fabs", F64, 1)
    bits = b.bitcast(t, I32)
    over = b.fcmp_ordered(">", b.fpext(b.call(fabs32, [t]), F64), b.call(fabs64, [x]))
    bits = b.select(over, b.sub(bits, ir.Constant(I32, 1)), bits)
    inexact = b.fcmp_unordered("!=", b.fpext(b.bitcast(bits, F32), F64), x)
    return b.bitcast(b.select(inexact, b.or_(bits, ir.Constant(I32, 1)), bits), F32)


def round_half(b: ir.IRBuilder, x):
    """A float32 value rounded to the nearest float16 (numpy rounds every
    float16 op's result: npy_float_to_half), kept as a float32.  One that is
    a float64 rounded to float32 (an op computed in double: sin, arctan2,
    a sum's double total) is rounded once from its double instead: LLVM
    would fold the two roundings into a call of compiler-rt's __truncdfhf2,
    which the process lacks."""
    if isinstance(x, ir.CastInstr) and x.opname == "fptrunc" and x.operands[0].type == F64:
        x = _to_float_odd(b, x.operands[0])
    return b.fpext(b.fptrunc(x, F16), F32)


def identity(op, dtype):
    """The value reduction `op` starts from in `dtype` (argmax's and argmin's
    best value: arg_dtype)."""
    op = {"argmax": "max", "argmin": "min"}.get(op, op)
    if dtype.kind == "f":
        return {"sum": 0.0, "prod": 1.0, "max": float("-inf"), "min": float("inf")}[op]
    return {"sum": 0, "prod": 1, "max": int(np.iinfo(dtype).min), "min": int(np.iinfo(dtype).max)}[op]


def arg_dtype(x: np.dtype) -> np.dtype:
    """The dtype argmax and argmin compare x's elements in."""
    return x if x.kind == "f" else np.dtype(np.int64)


def is_float_sum(n: Node) -> bool:
    return n.op == "sum" and n.out.dtype.kind == "f"


def add_block(b: ir.IRBuilder, m: ir.Module, n: Node, acc, total_cell, comp_cell) -> None:
    """total += the block's sum (float sum n's accumulator `acc`): exact
    enough in float64 for float32 sums; for float64 sums with a compensation
    term (Kahan's) in `comp_cell`, left out once the total is not finite
    (inf - inf would turn an overflow into NaN)."""
    block = b.load(acc)
    total = b.load(total_cell)
    if n.out.dtype != np.float64:
        b.store(b.fadd(total, b.fpext(block, F64)), total_cell)
        return
    y = b.fsub(block, b.load(comp_cell))
    t = b.fadd(total, y)
    comp = b.fsub(b.fsub(t, total), y)
    finite = b.fcmp_ordered("<", b.call(intrinsic(m, "llvm.fabs", F64, 1), [t]), ir.Constant(F64, float("inf")))
    b.store(b.select(finite, comp, ir.Constant(F64, 0.0)), comp_cell)
    b.store(t, total_cell)


def emitter(n: Node, types: list):
    """The emitter (codegen/emitters.py) of elementwise node n whose operands
    compute in `types` (operand_dtypes): complex, unsigned or float16 and
    clip-by-constant-bounds ties where numpy's loop differs."""
    op, out = n.op, n.out.dtype
    if any(t.kind == "c" for t in types) or out.kind == "c":
        return complexval.EMITTERS[op]
    if op in UNSIGNED and any(t.kind == "u" for t in types):
        return UNSIGNED[op]
    if op in TIE_FIRST and out.kind == "f" and (out == HALF or ("tie", "first") in n.attrs):
        return TIE_FIRST[op]
    return EMITTERS[op]


class ValueEmitter:
    """Values of one kernel's members.  `members` (output id -> node),
    `consts` (value id -> folded scalar), `ints` and `floats` (value id ->
    the scalar's i64 or double argument), `arrays` for inputs.  The
    schedule sets, per row: `base` (input id -> element offset of the row)
    and `inner` (input id -> element stride along the row), `known` (value
    id -> a value fixed for the row: a reduction's result) and `recip`
    (divide's output id -> the reciprocal of its divisor, in a final pass
    that multiplies instead)."""

    def __init__(self, b: ir.IRBuilder, m: ir.Module, members: dict[int, Node], consts: dict,
                 ints: dict, floats: dict, arrays: Arrays):
        self.b, self.m, self.members, self.consts = b, m, members, consts
        self.ints, self.floats, self.arrays = ints, floats, arrays
        self.base: dict = {}
        self.inner: dict = {}
        self.known: dict[int, ir.Value] = {}
        self.recip: dict = {}

    def value(self, v: Value, j, memo) -> ir.Value:
        """v's element at column j of the row (j None: a value of the row),
        each value computed once per `memo`."""
        if v.id in self.known:
            return self.known[v.id]
        if v.id in memo:
            return memo[v.id]
        if v.id in self.consts:
            c = self.consts[v.id]
            r = const(const_dtype(c), c)
        elif v.id in self.ints:
            r = self.ints[v.id]
        elif v.id in self.floats:
            r = self.floats[v.id]
            if isinstance(r, tuple):  # (a complex scalar: its parts, doubles, in its parts' dtype)
                part = complexval.part_dtype(v.dtype)
                r = CValue(*(cast(self.b, x, np.dtype(np.float64), part) for x in r))
        elif v.id in self.members:
            r = self._node(self.members[v.id], j, memo)
        else:
            b = self.b
            off = self.base[v.id]
            inner = self.inner[v.id]
            if j is not None and not (isinstance(inner, ir.Constant) and inner.constant == 0):
                off = b.add(off, j if (isinstance(inner, ir.Constant) and inner.constant == 1) else b.mul(j, inner))
            r = self.arrays.load(v, off)
        memo[v.id] = r
        return r

    def dtype(self, v: Value):
        """The numpy dtype of the LLVM value `value(v)` produces."""
        if v.id in self.consts:
            return const_dtype(self.consts[v.id])
        if v.id in self.ints:
            return np.dtype(np.int64)
        if v.id in self.floats:
            return v.dtype if v.dtype.kind == "c" else np.dtype(np.float64)
        return v.dtype

    def _node(self, n: Node, j, memo) -> ir.Value:
        """n's value: its operands cast to the dtype it computes in
        (shapes/ops.py COMPUTE), then codegen/emitters.py's emitter; a
        float16 rounded (round_half)."""
        r = self._computed(n, j, memo)
        return round_half(self.b, r) if n.out.dtype == HALF else r

    def _computed(self, n: Node, j, memo) -> ir.Value:
        op, out = n.op, n.out.dtype
        types = operand_dtypes(n)
        if op == "divide" and n.out.id in self.recip and out != HALF:  # (x * (1 / d) would round twice)
            return self.b.fmul(self._operand(n.inputs[0], types[0], j, memo), self.recip[n.out.id])
        emit = emitter(n, types)
        if op == "power":  # (the exponent: the constant the partition checked)
            return emit(self.b, self.m, self._operand(n.inputs[0], out, j, memo), self.consts.get(n.inputs[1].id))
        return emit(self.b, self.m, *(self._operand(v, t, j, memo) for v, t in zip(n.inputs, types)))

    def _operand(self, v: Value, dtype: np.dtype, j, memo) -> ir.Value:
        return cast(self.b, self.value(v, j, memo), self.dtype(v), dtype)

    def combine(self, n: Node, acc, x, flags):
        """acc op x for reduction n (codegen/emitters.py REDUCERS): ints and
        bools cast to the result's dtype first."""
        if n.out.dtype.kind != "f":
            x = cast(self.b, x, self.dtype(n.inputs[0]), n.out.dtype)
        if n.out.dtype.kind == "u" and n.op in UNSIGNED_REDUCERS:
            return UNSIGNED_REDUCERS[n.op](self.b, self.m, acc, x, flags)
        return REDUCERS[n.op](self.b, self.m, acc, x, flags)

    def reciprocals(self, divides: dict[int, Node]):
        """({divide node output id: 1/d}, all reciprocals normal) for
        `divides`, divisions by a value of the row."""
        b = self.b
        recip, ok = {}, ir.Constant(I1, 1)
        memo: dict = {}
        for vid, n in divides.items():
            t = LLTYPE[n.out.dtype]
            d = cast(b, self.value(n.inputs[1], None, memo), self.dtype(n.inputs[1]), n.out.dtype)
            r = b.fdiv(ir.Constant(t, 1.0), d)
            info = np.finfo(n.out.dtype)
            mag = b.call(intrinsic(self.m, "llvm.fabs", t, 1), [r])
            ok = b.and_(ok, b.and_(b.fcmp_ordered(">=", mag, ir.Constant(t, float(info.tiny))),
                                   b.fcmp_ordered("<=", mag, ir.Constant(t, float(info.max)))))
            recip[vid] = r
        return recip, ok


PAIRWISE_BLOCK = 128  # (numpy's PW_BLOCKSIZE)


def pairwise_sum(module: ir.Module, dt: np.dtype) -> ir.Function:
    """`T pairwise(i8* a, i64 n, i64 stride)`: numpy's pairwise summation of
    n floats of dt `stride` bytes apart (its @TYPE@_pairwise_sum, the order
    np.sum adds a float array's elements in): below 8 elements in order from
    -0.0; up to 128, eight interleaved sums, combined as a tree, then the
    rest in order; beyond, the two halves' (the first a multiple of 8)."""
    name = f"shapejit.pairwise.{dt.name}"
    if name in module.globals:
        return module.globals[name]
    ty = LLTYPE[dt]
    fn = ir.Function(module, ir.FunctionType(ty, [I8.as_pointer(), I64, I64]), name)
    fn.linkage = "internal"
    a, n, stride = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))

    def load(i):
        return b.load(b.bitcast(b.gep(a, [b.mul(i, stride)]), ty.as_pointer()))
    acc, acc_mid = b.alloca(ty), b.alloca(ty)  # (in the entry block: registers, once promoted)
    r = [b.alloca(ty) for _ in range(8)]
    small, mid, big = (fn.append_basic_block(x) for x in ("small", "mid", "big"))
    b.cbranch(b.icmp_signed("<", n, ir.Constant(I64, 8)), small, mid)
    b.position_at_end(small)
    b.store(ir.Constant(ty, -0.0), acc)
    with for_range(b, 0, n) as i:
        b.store(b.fadd(b.load(acc), load(i)), acc)
    b.ret(b.load(acc))
    b.position_at_end(mid)
    block = fn.append_basic_block("block")
    b.cbranch(b.icmp_signed("<=", n, ir.Constant(I64, PAIRWISE_BLOCK)), block, big)
    b.position_at_end(block)
    for j in range(8):
        b.store(load(ir.Constant(I64, j)), r[j])
    with for_range(b, 1, b.sdiv(n, ir.Constant(I64, 8))) as k:
        for j in range(8):
            b.store(b.fadd(b.load(r[j]), load(b.add(b.mul(k, ir.Constant(I64, 8)), ir.Constant(I64, j)))), r[j])
    x = [b.load(r[j]) for j in range(8)]
    res = b.fadd(b.fadd(b.fadd(x[0], x[1]), b.fadd(x[2], x[3])), b.fadd(b.fadd(x[4], x[5]), b.fadd(x[6], x[7])))
    b.store(res, acc_mid)
    with for_range(b, b.mul(b.sdiv(n, ir.Constant(I64, 8)), ir.Constant(I64, 8)), n) as i:
        b.store(b.fadd(b.load(acc_mid), load(i)), acc_mid)
    b.ret(b.load(acc_mid))
    b.position_at_end(big)
    half = b.sdiv(n, ir.Constant(I64, 2))
    half = b.sub(half, b.srem(half, ir.Constant(I64, 8)))
    left = b.call(fn, [a, half, stride])
    right = b.call(fn, [b.gep(a, [b.mul(half, stride)]), b.sub(n, half), stride])
    b.ret(b.fadd(left, right))
    return fn

"""The op set: every op registered once with its category, shape rule, dtype
rule, numpy reference implementation (the oracle and the eager fallback),
what its result may alias, and what a fused kernel computes of it (the
dtype kinds and the dtype it computes in).  Consumers own their tables,
keyed by these names: the tracer's numpy-to-op map (jit/optable.py),
codegen's emitters (codegen/emitters.py), the runtime's operators.

Shape rules take the ShapeEnv (to unify dims and record guards), the input
Values and the attrs, and return the output shapes.  Dtype rules follow
numpy 2 (NEP 50: Python scalars are weak) by asking numpy itself on tiny
arrays of the input dtypes, so they agree with eager numpy by construction.
"""
from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import sympy

from shapes.env import ShapeEnv
from shapes.ir import Value
from shapes.loop import LoopBody
from shapes.pyloop import dtype_of, run_pyloop

ELEMENTWISE = "elementwise"
REDUCE = "reduce"
VIEW = "view"
MATMUL = "matmul"
CONCAT = "concat"
CREATION = "creation"
UPDATE = "update"
GATHER = "gather"
LOOP = "loop"    # a re-rolled Python loop (shapes/loop.py): updates its first operand
LIFTED = "lifted"  # a lifted Python loop (shapes/pyloop.py): new contents of the arrays it stores into, scalars
NUMPY = "numpy"  # a numpy function with a shape rule, run as a numpy step (no kernel emitter)
OPAQUE = "opaque"


# What an op's numpy reference returns, for the runtime's memory decisions:
VIEW_OF_INPUT = "view"     # may share memory with its first operand
FRESH = "fresh"            # a new array, of any layout
FRESH_C = "fresh_c"        # a new C-contiguous array
TARGET = "target"          # its first operand's buffer, written, when that is dead; else a copy
EXTERNAL = "external"      # not made by the executable: a captured array, a scalar, anything (eager)

_RESULT_OF = {ELEMENTWISE: FRESH, REDUCE: FRESH_C, VIEW: VIEW_OF_INPUT, MATMUL: FRESH_C, CONCAT: FRESH_C,
              CREATION: FRESH_C, UPDATE: TARGET, LOOP: TARGET, LIFTED: FRESH, GATHER: FRESH, NUMPY: FRESH, OPAQUE: EXTERNAL}


# What a fused kernel computes (codegen/emitters.py holds the emitter of each
# op named here, tests/test_fusion.py checks the two agree): the dtype kinds
# of the results it computes the op for ("f": float32/float64, "i":
# int8..int64, "u": uint8..uint64, "b": bool, "c": complex64/complex128,
# codegen/complexval.py) ...
_KERNEL_KINDS = {
    "f": ("reciprocal", "expm1", "log1p", "tanh", "sin", "cos", "arctan", "floor",
          "ceil", "trunc", "rint", "fabs", "arctan2", "hypot", "real", "imag", "rad2deg", "deg2rad"),
    "fc": ("divide", "exp", "sqrt", "log"),
    "fiu": ("absolute", "sign", "maximum", "minimum", "clip", "sum", "prod", "max", "min", "floor_divide",
            "remainder", "fmod"),
    "fiuc": ("negative", "positive", "square", "add", "subtract", "multiply", "power", "conjugate"),
    "iu": ("argmax", "argmin", "left_shift", "right_shift"),
    "iub": ("bitwise_and", "bitwise_or", "bitwise_xor", "invert"),
    "b": ("logical_not", "logical_and", "logical_or", "logical_xor", "isnan", "isinf", "isfinite", "signbit",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal"),
    "fiubc": ("where", "astype"),
    "c": ("complex_of",),
}
KERNEL_KINDS = {op: kinds for kinds, ops in _KERNEL_KINDS.items() for op in ops}
# ... of which these only with a complex operand or result (codegen/complexval.py
# emits them; a real array's parts are the array itself and zeros: jit/optable.py)
COMPLEX_ONLY = frozenset({"real", "imag", "complex_of"})
# ... and the dtype it computes in, where that is not the result's: comparisons
# in their operands' promotion, logical ops in bool, float predicates in
# their operand's dtype, where's condition in bool and its choices in the result's
_COMPUTE = {"promoted": ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"),
            "bool": ("logical_not", "logical_and", "logical_or", "logical_xor"),
            "operand": ("isnan", "isinf", "isfinite", "signbit"),
            "select": ("where",)}
COMPUTE = {op: how for how, ops in _COMPUTE.items() for op in ops}


@dataclass(frozen=True)
class OpDef:
    name: str
    category: str
    ref: Callable
    shape_rule: Callable  # (env, inputs, attrs) -> list[shape]
    dtype_rule: Callable  # (inputs, attrs) -> list[np.dtype]
    result: str           # VIEW_OF_INPUT | FRESH | FRESH_C | TARGET | EXTERNAL
    kernel: str = ""      # the result dtype kinds a fused kernel computes it for (KERNEL_KINDS); "": none
    compute: str = "result"  # the dtype a kernel computes it in (COMPUTE)
    raises: bool = False  # may raise at run time where numpy would: kept though nothing reads it


OPS: dict[str, OpDef] = {}


def register(name, category, ref, shape_rule, dtype_rule=None, result=None, raises=False):
    OPS[name] = OpDef(name, category, ref, shape_rule, dtype_rule or _dtype_by_numpy(ref),
                      result or _RESULT_OF[category], KERNEL_KINDS.get(name, ""), COMPUTE.get(name, "result"),
                      raises)
    return OPS[name]


def kernel_ops(*categories: str) -> frozenset:
    """Names of the ops a fused kernel computes (of `categories`, or any)."""
    return frozenset(n for n, op in OPS.items() if op.kernel and (not categories or op.category in categories))


def ops_returning(*kinds: str) -> frozenset:
    """Names of the ops whose result is one of `kinds`."""
    return frozenset(n for n, op in OPS.items() if op.result in kinds)


# ------------------------------------------------------------------ dtypes

def dummy(v: Value):
    """A value numpy's dtype rules see as they see v: a Python number of its
    kind where v is weak, else an array of its dtype and ndim."""
    if v.weak:
        return {"b": True, "i": 1, "u": 1, "f": 1.0, "c": 1j}[v.dtype.kind]
    return np.ones((1,) * v.ndim, dtype=v.dtype)


def _dtype_by_numpy(ref):
    def rule(inputs, attrs):
        return _cached_dtypes(ref, tuple((v.dtype, v.ndim, v.weak) for v in inputs), _no_symbols(attrs))
    return rule


def _no_symbols(a):
    """attrs with each symbolic int 0 (a dtype depends on none: std's ddof
    of an int argument that changes)."""
    if isinstance(a, sympy.Basic):
        return 0
    return tuple(_no_symbols(x) for x in a) if type(a) is tuple else a


@functools.lru_cache(maxsize=4096)
def _cached_dtypes(ref, sig, attrs):
    args = [dummy(Value(-1, dt, (1,) * nd, weak)) for dt, nd, weak in sig]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = ref(*args, **dict(attrs))
    outs = out if isinstance(out, tuple) else (out,)
    return [np.asarray(o).dtype for o in outs]


def _same_dtype(inputs, attrs):
    return [inputs[0].dtype]


# ------------------------------------------------------------ broadcasting

def broadcast_shapes(env: ShapeEnv, shapes, what: str = "operands") -> tuple:
    """numpy broadcasting over symbolic dims: two non-1 dims unify."""
    nd = max((len(s) for s in shapes), default=0)
    out = []
    for ax in range(nd):
        dim = 1
        for s in shapes:
            k = ax - (nd - len(s))
            if k < 0:
                continue
            d = s[k]
            if _is_one(d):
                continue
            if _is_one(dim):
                dim = d
                continue
            if env.simplify(dim) != env.simplify(d):
                if env.hint(dim) != env.hint(d):
                    # (a size only the data decides -- an output of numpy's own call, np.ix_'s (n, 1) -- that is 1
                    # here stretches, as numpy's: it becomes 1, checked where it is bound, so every kernel that
                    # reads the operand broadcasts it; a size left a symbol would be read as the domain's)
                    if env.hint(d) == 1:
                        env.unify(d, 1, f"broadcast of {what} at axis {ax - nd}")
                        continue
                    if env.hint(dim) == 1:
                        env.unify(dim, 1, f"broadcast of {what} at axis {ax - nd}")
                        dim = d
                        continue
                    raise ValueError(
                        "operands could not be broadcast together with shapes "
                        + " ".join(str(tuple(env.hint(x) for x in s)) for s in shapes))
                env.unify(dim, d, f"broadcast of {what} at axis {ax - nd}")
        out.append(env.simplify(dim))
    return tuple(out)


def _is_one(d) -> bool:
    return isinstance(d, int) and d == 1


def _elementwise_shape(env, inputs, attrs):
    return [broadcast_shapes(env, [v.shape for v in inputs])]


# ------------------------------------------------------------ elementwise

UNARY_UFUNCS = [
    "negative", "positive", "absolute", "square", "sqrt", "reciprocal", "sign", "exp", "exp2",
    "expm1", "log", "log2", "log10", "log1p", "tanh", "sinh", "cosh", "sin", "cos", "tan",
    "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "floor", "ceil", "trunc",
    "rint", "logical_not", "isnan", "isinf", "isfinite", "signbit", "invert", "cbrt",
    "conjugate", "deg2rad", "rad2deg", "fabs",
]
BINARY_UFUNCS = [
    "add", "subtract", "multiply", "divide", "floor_divide", "remainder", "fmod", "power",
    "float_power", "maximum", "minimum", "fmax", "fmin", "equal", "not_equal", "less",
    "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor",
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "arctan2",
    "hypot", "copysign", "logaddexp", "logaddexp2", "heaviside", "nextafter",
]

for _name in UNARY_UFUNCS + BINARY_UFUNCS:
    register(_name, ELEMENTWISE, getattr(np, _name), _elementwise_shape)
# a complex array's parts (numpy's are views: jit/optable.py keeps them views for writes)
register("real", ELEMENTWISE, np.real, _elementwise_shape)
register("imag", ELEMENTWISE, np.imag, _elementwise_shape)


def _complex_of(re, im):
    """The complex array of parts re and im (what `z.real = re; z.imag = im` writes), exactly."""
    out = np.empty(np.broadcast_shapes(np.shape(re), np.shape(im)), np.result_type(re, im, np.complex64))
    out.real, out.imag = re, im
    arrays = isinstance(re, np.ndarray) or isinstance(im, np.ndarray)
    return out if arrays else out[()]  # (of numpy scalars, such as a complex sum's parts: a numpy scalar)


register("complex_of", ELEMENTWISE, _complex_of, _elementwise_shape)


def _where(c, a, b):
    return np.where(c, a, b)


def _clip(x, lo, hi, tie=None):
    """np.clip (tie="first": the bounds are one value each, where numpy keeps
    x on a tie with a bound; its own loop does that here)."""
    return np.clip(x, lo, hi)


def _astype(x, dtype, checked=False):
    """x.astype(dtype): a numpy scalar of a numpy scalar, as numpy's.
    `checked`: an effect checks that every value converts (Python's int()
    of a float, jit/tracer.py IntOfFloat): a call whose value does not runs
    in numpy, so the cast's own warning of it is not given."""
    if checked:
        with np.errstate(invalid="ignore"):
            out = np.asarray(x).astype(dtype)
    else:
        out = np.asarray(x).astype(dtype)
    return out[()] if isinstance(x, np.generic) else out


register("where", ELEMENTWISE, _where, _elementwise_shape)
register("clip", ELEMENTWISE, _clip, _elementwise_shape)
register("astype", ELEMENTWISE, _astype, lambda env, i, a: [i[0].shape],
         lambda inputs, attrs: [np.dtype(dict(attrs)["dtype"])])  # (a copy in the input's layout: FRESH)


# -------------------------------------------------------------- reductions

def _reduce_shape(env, inputs, attrs):
    a = dict(attrs)
    shape, axis, keep = inputs[0].shape, a.get("axis"), a.get("keepdims", False)
    axes = range(len(shape)) if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    if keep:
        return [tuple(1 if i in axes else d for i, d in enumerate(shape))]
    return [tuple(d for i, d in enumerate(shape) if i not in axes)]


def _reduction(fn):
    def ref(x, axis=None, keepdims=False, **kw):
        return fn(x, axis=axis, keepdims=keepdims, **kw)
    ref.__name__ = fn.__name__
    return ref


REDUCTIONS = ["sum", "mean", "max", "min", "prod", "var", "std", "any", "all", "argmax", "argmin"]
for _name in REDUCTIONS:
    register(_name, REDUCE, _reduction(getattr(np, _name)), _reduce_shape)


def _numpy_reduction(x, fn, axis=None, keepdims=False, **kw):
    """A numpy reduction run as a numpy step (np.median, np.nanmean,
    np.percentile of a scalar q...): `fn` names it, one of NUMPY_REDUCTIONS
    (a saved trace's attrs are data: never any other numpy name)."""
    if fn not in NUMPY_REDUCTIONS:
        raise ValueError(f"np_reduce of {fn!r}")
    return getattr(np, fn)(x, axis=axis, keepdims=keepdims, **kw)


def _ufunc(name: str) -> np.ufunc:
    """The numpy ufunc `name` names (an op's attr: never another numpy name)."""
    f = getattr(np, name, None)
    if not isinstance(f, np.ufunc):
        raise ValueError(f"{name!r} is not a numpy ufunc")
    return f


NUMPY_REDUCTIONS = ("median", "nanmean", "nanmax", "nanmin", "nanstd", "nanvar", "nanprod", "nanargmax",
                    "nanargmin", "percentile", "quantile", "nanmedian", "nanpercentile", "nanquantile")
register("np_reduce", NUMPY, _numpy_reduction, _reduce_shape)


def _quantiles(x, q, fn, axis=None, keepdims=False, **kw):
    """np.percentile (or quantile, nan-) of x at the traced q, a numpy step."""
    if fn not in ("percentile", "quantile", "nanpercentile", "nanquantile"):
        raise ValueError(f"quantiles of {fn!r}")
    return getattr(np, fn)(x, q, axis=axis, keepdims=keepdims, **kw)


register("quantiles", NUMPY, _quantiles,
         lambda env, i, a: [tuple(i[1].shape) + _reduce_shape(env, i[:1], a)[0]])


# ------------------------------------------------------------------- views

def _reshape(x, shape):
    return np.reshape(x, shape)


def _transpose(x, perm):
    return np.transpose(x, perm)


def _broadcast_to(x, shape):
    return np.broadcast_to(x, shape)


def _getitem(x, items, shape):
    return x[index_from_items(items)]


def index_from_items(items) -> tuple:
    """Normalized items (see shapes.indexing) back to a numpy index."""
    idx = []
    for it in items:
        kind = it[0]
        if kind == "int":
            idx.append(it[1])
        elif kind == "slice":
            _, start, step, length = it
            stop = start + step * length
            idx.append(slice(start, None if stop < 0 else stop, step))
        else:
            idx.append(None)
    return tuple(idx)


register("reshape", VIEW, _reshape, lambda env, i, a: [dict(a)["shape"]], _same_dtype)
register("transpose", VIEW, _transpose,
         lambda env, i, a: [tuple(i[0].shape[p] for p in dict(a)["perm"])], _same_dtype)
register("broadcast_to", VIEW, _broadcast_to,
         lambda env, i, a: [broadcast_shapes(env, [i[0].shape, dict(a)["shape"]], "broadcast_to")
                            and dict(a)["shape"]], _same_dtype)
register("getitem", VIEW, _getitem, lambda env, i, a: [dict(a)["shape"]], _same_dtype)


# ------------------------------------------------------- updates and gathers
#
# In-place numpy (`a[idx] = v`, `a += b`, `out=`) is functionalized by the
# tracer: an update makes a new value, a copy of the target with the region
# written, that later reads see (the runtime writes in place when the old
# value is dead).  Index items are those of shapes.indexing plus
# ("array", k): the k-th index operand (an integer or boolean array).

def index_of(items, arrays) -> tuple:
    """Normalized items with their index operands back to a numpy index."""
    idx = []
    for it in items:
        if it[0] == "array":
            idx.append(arrays[it[1]])
        else:
            idx += index_from_items((it,))
    return tuple(idx)


def _setitem(x, v, *arrays, items):
    out = np.array(x, copy=True)
    out[index_of(items, arrays)] = v
    return out


def _index(x, *arrays, items):
    return x[index_of(items, arrays)]


def _index_shape(env, inputs, attrs):
    """numpy's advanced indexing: the index arrays broadcast together; their
    shape replaces the indexed axes in place when those are adjacent, else
    it leads (basic items give their own dims, ints none)."""
    items = dict(attrs)["items"]
    x, arrays = inputs[0], inputs[1:]
    bshape = broadcast_shapes(env, [a.shape for a in arrays], "index arrays")
    pos = [k for k, it in enumerate(items) if it[0] in ("array", "int")]
    adjacent = pos == list(range(pos[0], pos[-1] + 1))
    out, ax, placed = [], 0, False
    if not adjacent:
        out += bshape
        placed = True
    for it in items:
        if it[0] == "new":
            out.append(1)
            continue
        if it[0] in ("array", "int"):
            if not placed:
                out += bshape
                placed = True
        else:
            out.append(it[3])
        ax += 1
    out += x.shape[ax:]
    return [tuple(env.simplify(d) for d in out)]


def _take_along_axis(x, idx, axis):
    return np.take_along_axis(x, idx, axis=axis)


def _take_along_shape(env, inputs, attrs):
    x, idx = inputs
    axis = dict(attrs)["axis"]
    others = [tuple(1 if k == axis else d for k, d in enumerate(s)) for s in (x.shape, idx.shape)]
    b = broadcast_shapes(env, others, "take_along_axis")
    return [tuple(idx.shape[axis] if k == axis else d for k, d in enumerate(b))]


def _setitem_shape(env, inputs, attrs):
    """The target's shape; the value must broadcast into the region written."""
    items = dict(attrs)["items"]
    x, v, arrays = inputs[0], inputs[1], inputs[2:]
    if any(it[0] == "array" and a.dtype == np.bool_ for it, a in zip((i for i in items if i[0] == "array"),
                                                                     arrays)):
        return [x.shape]  # a mask: how many values it takes is data-dependent
    if arrays:
        region = _index_shape(env, [x] + list(arrays), attrs)[0]
    else:
        region = tuple(1 if it[0] == "new" else it[3] for it in items if it[0] != "int") + \
            tuple(x.shape[sum(1 for it in items if it[0] != "new"):])
    vs = tuple(v.shape)
    while len(vs) > len(region) and _is_one(vs[0]):
        vs = vs[1:]
    if len(vs) > len(region):
        raise ValueError(f"could not broadcast input array from shape {tuple(map(env.hint, v.shape))} "
                         f"into shape {tuple(map(env.hint, region))}")
    for a, b in zip(reversed(vs), reversed(region)):
        if not _is_one(a) and env.simplify(a) != env.simplify(b):
            env.unify(a, b, "assignment into a slice")
    return [x.shape]


def _ufunc_at(x, v, *arrays, items, ufunc):
    """np.<ufunc>.at(x, index, v) on a copy of x: unbuffered, so repeated
    indices apply once each."""
    out = np.array(x, copy=True)
    _ufunc(ufunc).at(out, index_of(items, arrays), v)
    return out


# numpy functions that write their first operand (np.put, np.fill_diagonal...)
# and np.partition, whose result has its operand's shape and dtype: the
# operands after the first, by name
NUMPY_UPDATES = {"put": ("ind", "v"), "place": ("mask", "vals"), "putmask": ("mask", "values"),
                 "put_along_axis": ("indices", "values"), "fill_diagonal": ("val",)}
NUMPY_SAME_SHAPE = {"partition": ()}


def _numpy_update(x, *operands, fn, kw):
    """np.<fn>(x, *operands, **kw): an update of a copy of x (fn one of
    NUMPY_UPDATES), or np.partition's result (a saved trace's attrs are
    data: never any other numpy name)."""
    if fn in NUMPY_SAME_SHAPE:
        return getattr(np, fn)(x, *operands, **dict(kw))
    if fn not in NUMPY_UPDATES:
        raise ValueError(f"np_update of {fn!r}")
    out = np.array(x, copy=True)
    getattr(np, fn)(out, *operands, **dict(kw))
    return out


def _correlate_length(env, n, m, mode: str):
    """np.convolve / np.correlate's length of 1-D operands of n and m."""
    if mode == "full":
        return env.simplify(n + m - 1)
    if mode == "same":
        return env.simplify(sympy.Max(n, m))
    return env.simplify(sympy.Max(n, m) - sympy.Min(n, m) + 1)


# numpy functions run as numpy steps whose shape and dtype follow from their
# operands' (jit/optable.py): name -> (shape rule (env, inputs, kw), dtype
# rule (inputs, kw)).  An eager call's sizes would be data-dependent.
NUMPY_SHAPED = {
    "searchsorted": (lambda env, i, kw: i[1].shape, lambda i, kw: np.dtype(np.intp)),
    "argpartition": (lambda env, i, kw: i[0].shape, lambda i, kw: np.dtype(np.intp)),
    "interp": (lambda env, i, kw: i[0].shape,
               lambda i, kw: np.dtype(np.complex128 if i[2].dtype.kind == "c" else np.float64)),
    "convolve": (lambda env, i, kw: (_correlate_length(env, i[0].shape[0], i[1].shape[0], kw["mode"]),),
                 lambda i, kw: np.result_type(i[0].dtype, i[1].dtype)),
    "correlate": (lambda env, i, kw: (_correlate_length(env, i[0].shape[0], i[1].shape[0], kw["mode"]),),
                  lambda i, kw: np.result_type(i[0].dtype, i[1].dtype)),
}


def _numpy_shaped(*xs, fn, kw):
    """np.<fn>(*xs, **kw), fn one of NUMPY_SHAPED (a saved trace's attrs are
    data: never any other numpy name)."""
    if fn not in NUMPY_SHAPED:
        raise ValueError(f"np_shaped of {fn!r}")
    return getattr(np, fn)(*xs, **dict(kw))


register("np_shaped", NUMPY, _numpy_shaped,
         lambda env, i, a: [tuple(NUMPY_SHAPED[dict(a)["fn"]][0](env, i, dict(dict(a)["kw"])))],
         lambda i, a: [NUMPY_SHAPED[dict(a)["fn"]][1](i, dict(dict(a)["kw"]))])


def _sliding_window(x, window, axis):
    """np.lib.stride_tricks.sliding_window_view: a read-only view of x."""
    return np.lib.stride_tricks.sliding_window_view(x, window, axis)


def _sliding_window_shape(env, inputs, attrs):
    a = dict(attrs)
    shape = list(inputs[0].shape)
    for w, ax in zip(a["window"], a["axis"]):
        if not env.compare(">=", shape[ax], w, "sliding_window_view: a window no larger than its axis"):
            raise ValueError("window shape cannot be larger than input array shape")
        shape[ax] = env.simplify(sympy.sympify(shape[ax]) - w + 1)
    return [tuple(shape) + tuple(a["window"])]


register("sliding_window", VIEW, _sliding_window, _sliding_window_shape, _same_dtype)


def _diagonal(x, offset, axis1, axis2):
    """np.diagonal: a read-only view of x."""
    return np.diagonal(x, offset, axis1, axis2)


def _diagonal_shape(env, inputs, attrs):
    """x's dims without axis1 and axis2, then the diagonal's length: min(n1,
    n2 - offset) for offset >= 0, min(n1 + offset, n2) below, at least 0 (a
    shape decision, guarded)."""
    a = dict(attrs)
    x, off, a1, a2 = inputs[0], a["offset"], a["axis1"], a["axis2"]
    n1, n2 = sympy.sympify(x.shape[a1]), sympy.sympify(x.shape[a2])
    p, q = (n1, n2 - off) if off >= 0 else (n1 + off, n2)
    length = p if env.compare("<=", p, q, "np.diagonal: the shorter side") else q
    if not env.compare(">=", length, 0, "np.diagonal: an offset within the array"):
        length = 0
    return [tuple(d for i, d in enumerate(x.shape) if i not in (a1, a2)) + (env.simplify(sympy.sympify(length)),)]


register("diagonal", VIEW, _diagonal, _diagonal_shape, _same_dtype)


FFTS = ("fft", "ifft", "rfft", "irfft")


def _fft(x, fn, n, axis, norm):
    """np.fft.<fn> (one of FFTS) along one axis, as a numpy step."""
    if fn not in FFTS:
        raise ValueError(f"fft of {fn!r}")
    return getattr(np.fft, fn)(x, n=n, axis=axis, norm=norm)


def _fft_shape(env, inputs, attrs):
    a = dict(attrs)
    shape, axis, n = list(inputs[0].shape), a["axis"], a["n"]
    d = shape[axis] if n is None else n
    if a["fn"] == "rfft":
        shape[axis] = env.simplify(sympy.floor(sympy.sympify(d) / 2) + 1)
    elif a["fn"] == "irfft":
        shape[axis] = env.simplify(2 * (sympy.sympify(d) - 1)) if n is None else n
    else:
        shape[axis] = d
    return [tuple(shape)]


@functools.lru_cache(maxsize=256)
def _fft_dtype_of(fn, dtype):
    return getattr(np.fft, fn)(np.ones(4, dtype)).dtype


register("fft", NUMPY, _fft, _fft_shape, lambda inputs, attrs: [_fft_dtype_of(dict(attrs)["fn"], inputs[0].dtype)])
register("setitem", UPDATE, _setitem, _setitem_shape, _same_dtype)
register("np_update", NUMPY, _numpy_update, lambda env, i, a: [i[0].shape], _same_dtype)
register("ufunc_at", NUMPY, _ufunc_at, _setitem_shape, _same_dtype)
register("index", GATHER, _index, _index_shape, _same_dtype)
register("take_along_axis", GATHER, _take_along_axis, _take_along_shape, _same_dtype)


# ------------------------------------------------------------ numpy steps

def _cov(m):
    return np.cov(m)


# scans and sorts along one axis (attrs: `axis`, an int: jit/optable.py
# flattens the array where numpy's is None), of the input's shape
for _name in ("cumsum", "cumprod", "sort", "argsort"):
    register(_name, NUMPY, getattr(np, _name), lambda env, i, a: [i[0].shape])


def _lexsort(*keys, axis):
    return np.lexsort(keys, axis=axis)


register("lexsort", NUMPY, _lexsort, lambda env, i, a: [i[0].shape])


def _zero_d(x):
    """np.array of a 0-d value: a 0-d array (numpy's scalar, a Python number: np.asarray(x.sum()))."""
    return np.array(x)


register("zero_d", NUMPY, _zero_d, lambda env, i, a: [()], lambda inputs, attrs: [inputs[0].dtype])


def _accumulate(x, ufunc, axis, dtype=None):
    return _ufunc(ufunc).accumulate(x, axis=axis, dtype=dtype)


register("accumulate", NUMPY, _accumulate, lambda env, i, a: [i[0].shape])


def _ufunc_reduce(x, ufunc, axis, keepdims=False):
    return _ufunc(ufunc).reduce(x, axis=axis, keepdims=keepdims)


register("ufunc_reduce", NUMPY, _ufunc_reduce, _reduce_shape)
register("cholesky", NUMPY, np.linalg.cholesky, lambda env, i, a: [i[0].shape])
register("inv", NUMPY, np.linalg.inv, lambda env, i, a: [i[0].shape])
register("cov", NUMPY, _cov, lambda env, i, a: [(i[0].shape[0], i[0].shape[0])])


register("solve", NUMPY, np.linalg.solve, lambda env, i, a: [i[1].shape])


def _tri_indices(n, k, upper, count):
    """np.triu_indices(n, k) (np.tril_indices when not `upper`): the row and
    column indices, `count` of each."""
    return (np.triu_indices if upper else np.tril_indices)(n, k)


register("tri_indices", NUMPY, _tri_indices, lambda env, i, a: [(dict(a)["count"],)] * 2,
         lambda inputs, attrs: [np.dtype(np.intp)] * 2)


def _histogram(a, *weights, bins, range, density):
    """np.histogram of `a` (with `weights`, when given) into `bins` equal
    bins: (counts, edges)."""
    return np.histogram(a, bins, range, density, weights[0] if weights else None)


@functools.lru_cache(maxsize=64)
def _histogram_dtypes(a, w, range, density):
    out = np.histogram(np.arange(2, dtype=a), 2, range, density, None if w is None else np.ones(2, w))
    return [out[0].dtype, out[1].dtype]


register("histogram", NUMPY, _histogram,
         lambda env, i, a: [(dict(a)["bins"],), (env.simplify(sympy.sympify(dict(a)["bins"]) + 1),)],
         lambda i, a: _histogram_dtypes(i[0].dtype, i[1].dtype if len(i) > 1 else None, dict(a)["range"],
                                        dict(a)["density"]))


# ----------------------------------------------------------------- concat

def _concatenate(*xs, axis):
    return np.concatenate(xs, axis=axis)


def _concat_shape(env, inputs, attrs):
    axis = dict(attrs)["axis"]
    first = inputs[0].shape
    for v in inputs[1:]:
        if len(v.shape) != len(first):
            raise ValueError("all the input arrays must have same number of dimensions")
        for k, (a, b) in enumerate(zip(first, v.shape)):
            if k != axis:
                env.unify(a, b, f"concatenate along axis {axis}")
    total = sum((v.shape[axis] for v in inputs), sympy.Integer(0))
    return [tuple(env.simplify(total) if k == axis else env.simplify(d) for k, d in enumerate(first))]


register("concatenate", CONCAT, _concatenate, _concat_shape,
         lambda inputs, attrs: [np.result_type(*[v.dtype for v in inputs])])


# ------------------------------------------------------------------ matmul

def _matmul_shape(env, inputs, attrs):
    a, b = inputs[0].shape, inputs[1].shape
    if len(a) == 0 or len(b) == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    if env.simplify(a2[-1]) != env.simplify(b2[-2]):
        if env.hint(a2[-1]) != env.hint(b2[-2]):
            raise ValueError(
                f"matmul: Input operand 1 has a mismatch in its core dimension 0 "
                f"(size {env.hint(b2[-2])} is different from {env.hint(a2[-1])})")
        env.unify(a2[-1], b2[-2], "matmul contraction dims")
    batch = broadcast_shapes(env, [a2[:-2], b2[:-2]], "matmul batch dims")
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return [tuple(env.simplify(d) for d in out)]


register("matmul", MATMUL, np.matmul, _matmul_shape)


def _einsum(*xs, subscripts):
    return np.einsum(subscripts, *xs)


def _einsum_shape(env, inputs, attrs):
    subs = dict(attrs)["subscripts"].replace(" ", "")
    lhs, _, rhs = subs.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(inputs) or "." in subs:
        raise ValueError(f"einsum: unsupported subscripts {subs!r} for {len(inputs)} operands")
    sizes: dict[str, object] = {}
    for term, v in zip(terms, inputs):
        if len(term) != v.ndim:
            raise ValueError(f"einsum: operand has {v.ndim} dims but subscripts {term!r}")
        for ch, d in zip(term, v.shape):
            if ch in sizes and not (_is_one(d) or _is_one(sizes[ch])):
                env.unify(sizes[ch], d, f"einsum index {ch!r}")
            elif ch not in sizes or _is_one(sizes[ch]):
                sizes[ch] = d
    if not _:
        counts = {c: lhs.count(c) for c in set(lhs.replace(",", ""))}
        rhs = "".join(sorted(c for c, n in counts.items() if n == 1))
    return [tuple(env.simplify(sizes[c]) for c in rhs)]


register("einsum", MATMUL, _einsum, _einsum_shape,
         lambda inputs, attrs: [np.result_type(*[v.dtype for v in inputs])],
         result=VIEW_OF_INPUT)  # (np.einsum("ij->ji", x) is a view of x)


# ---------------------------------------------------------------- creation

def _full(shape, fill, dtype):
    return np.full(shape, fill, dtype=dtype)


def _arange(start, stop, step, dtype, length):
    return np.arange(start, stop, step, dtype=dtype)


def _const(value):
    return value.array if hasattr(value, "array") else value


def _dim(expr):
    return expr


register("full", CREATION, _full, lambda env, i, a: [dict(a)["shape"]],
         lambda inputs, attrs: [np.dtype(dict(attrs)["dtype"])])
register("arange", CREATION, _arange, lambda env, i, a: [(dict(a)["length"],)],
         lambda inputs, attrs: [np.dtype(dict(attrs)["dtype"])])
register("const", CREATION, _const, lambda env, i, a: [np.shape(_const(dict(a)["value"]))],
         lambda inputs, attrs: [np.asarray(_const(dict(attrs)["value"])).dtype], result=EXTERNAL)
register("dim", CREATION, _dim, lambda env, i, a: [()], lambda inputs, attrs: [np.dtype(np.int64)],
         result=EXTERNAL)


def _index_dim(x, symbol):
    return np.int64(x)


# a traced integer scalar used as an index (`x[:, obs[t]]`, `x[np.argmax(v)]`): its value, which the
# executable binds to the data-dependent size `symbol` (runtime/generate.py), so the index is a view
# with a symbolic offset that serves every value (jit/tracer.py TraceContext.index_dim)
register("index_dim", OPAQUE, _index_dim, lambda env, i, a: [()], lambda inputs, attrs: [np.dtype(np.int64)])


# -------------------------------------------------------------------- loop

def run_loop(*xs, body: LoopBody, base=None):
    """The `loop` op's numpy reference: the trips, node by node (a nested
    loop's integers as the outer trip moved them: `base`, the loop node's)."""
    prev: dict[int, object] = {}
    trips, bases = (body.trips, [None] * len(body.nodes)) if base is None else body.split(base)
    for t in range(trips):
        cur: dict[int, object] = {}
        for q, n in enumerate(body.nodes):
            args = []
            for r in body.refs[q]:
                if r[0] == "in":
                    args.append(xs[r[1]])
                elif r[0] == "local":
                    args.append(cur[r[1]])
                else:
                    args.append(xs[r[1]] if t == 0 else prev[r[2]])
            if n.op == "loop":
                cur[q] = run_loop(*args, body=n.attr("body"), base=body.moved_ints(q, t, base=bases[q]))
            else:
                attrs, _ = body.attrs_at(q, t, base=bases[q])
                cur[q] = OPS[n.op].ref(*args, **dict(attrs))
        prev = cur
    return np.asarray(prev[body.result]) if trips else xs[0]


register("loop", LOOP, run_loop, lambda env, i, a: [i[0].shape], _same_dtype)


register("pyloop", LIFTED, run_pyloop,
         lambda env, i, a: [i[k].shape for k in dict(a)["program"].written] + [()] * len(dict(a)["program"].outputs),
         lambda i, a: [i[k].dtype for k in dict(a)["program"].written]
         + [dtype_of(t) for _, t in dict(a)["program"].outputs], raises=True)


# ------------------------------------------------------------------ opaque

def _scan_ref(*xs, call):
    out = call(list(xs))
    return out[0] if len(out) == 1 else tuple(out)


def _carried(inputs, attrs) -> list:
    """A scan's carried operands (after its trip bounds, before what it reads)."""
    return list(inputs[2:2 + dict(attrs)["call"].n_carried])


# a Python loop over a symbolic trip count (jit/scan.py): inputs (start, stop, carried...,
# read...), outputs the carried values after the last trip, each as it was before the first,
# then the arrays of what each trip appended to a list (a row per trip: `stacked`), then (`last`)
# the index of the last trip run
register("scan", OPAQUE, _scan_ref,
         lambda env, i, a: [x.shape for x in _carried(i, a)] + list(dict(a)["call"].stacked_shapes)
         + [()] * dict(a)["call"].last,
         lambda i, a: [x.dtype for x in _carried(i, a)] + [np.dtype(d) for d in dict(a)["call"].stacked_dtypes]
         + [np.dtype(np.int64)] * dict(a)["call"].last,
         raises=True)

def _eager_ref(*xs, call):
    return call(xs)


register("eager", OPAQUE, _eager_ref, lambda env, i, a: [], lambda inputs, attrs: [])
# a side effect of every call (jit/trace.py's print): its one output a token nothing reads, never dropped
register("effect", OPAQUE, _eager_ref, lambda env, i, a: [()], lambda inputs, attrs: [np.dtype(np.bool_)],
         raises=True)

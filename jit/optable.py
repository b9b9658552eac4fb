"""The numpy -> op table: how each numpy function, ufunc, method and index
expression called on a Tracer becomes IR.  Anything not in the table becomes
an opaque eager node (`eager_call`), so every program still runs."""
from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass

import numpy as np
import sympy

from jit import pytree
from jit import tracer
from jit.tracer import Fallback, Stacked, SymFloat, SymInt, TraceContext, TraceError, Tracer, holds_traced, \
    user_location
from shapes.indexing import infer_reshape, normalize_index
from shapes.ops import ELEMENTWISE, FFTS, NUMPY_REDUCTIONS, NUMPY_SAME_SHAPE, NUMPY_UPDATES, OPS, dummy


# ------------------------------------------------------------------ eager

@dataclass(eq=False)  # identity semantics: two eager calls are never "the same node"
class EagerCall:
    """An opaque numpy call with Tracer leaves replaced at run time."""
    fn: object
    treedef: object
    leaves: tuple
    slots: tuple
    name: str
    direct: bool = False  # fn(*xs): every argument one traced leaf, no keywords (x[mask])

    @property
    def __name__(self) -> str:
        return self.name

    def __call__(self, xs):
        if self.direct:
            out = self.fn(*xs)
            if type(out) is np.ndarray:
                return [out]
        else:
            out = self._call(xs)
        flat: list = []
        pytree.flatten(tuple(out) if _named_tuple(out) else out, flat)
        return flat

    def _call(self, xs):
        leaves = list(self.leaves)
        for slot, x in zip(self.slots, xs):
            leaves[slot] = x
        args, kwargs = pytree.unflatten(self.treedef, iter(leaves))
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return self.name


def _fn_name(fn) -> str:
    mod = getattr(fn, "__module__", None) or "numpy"
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{mod.split('.')[0]}.{name}" if not mod.startswith("numpy") else f"np.{name}"


def eager_call(ctx: TraceContext, fn, args, kwargs, name: str | None = None):
    """Record `fn(*args, **kwargs)` as an eager node; return its traced result."""
    leaves: list = []
    treedef = pytree.flatten((tuple(args), dict(kwargs)), leaves)
    slots, inputs = [], []
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, (Tracer, SymInt)):
            t = ctx.operand(leaf)
            slots.append(k)
            inputs.append(t)
            leaves[k] = None
    name = name or _fn_name(fn)
    direct = not kwargs and len(slots) == len(args) == len(leaves) and all(
        isinstance(a, (Tracer, SymInt)) for a in args)
    call = EagerCall(fn, treedef, tuple(leaves), tuple(slots), name, direct)
    # (copies: a function that writes its operands, such as np.add.at, must
    # not write the caller's arrays while tracing; it returns None, and the
    # call runs in numpy once, from the arrays as they were)
    values = [t.concrete.copy(order="K") if isinstance(t.concrete, np.ndarray) else t.concrete for t in inputs]
    args, kwargs = pytree.unflatten(treedef, iter(_fill(leaves, slots, values)))
    with np.errstate(all="ignore"):
        out = fn(*args, **kwargs)
    flat: list = []
    named = type(out) if _named_tuple(out) else None
    out_def = pytree.flatten(tuple(out) if named else out, flat)  # (np.linalg.qr's QRResult: its arrays)
    for r in flat:
        if not isinstance(r, (np.ndarray, np.generic)):
            raise Fallback(f"{name} returned a {type(r).__name__}, not an array", user_location())
        if np.asarray(r).dtype.kind in "OSUV":
            raise Fallback(f"{name} returned dtype {np.asarray(r).dtype}", user_location())
    views = _views(flat, values)
    if views and all(_same_bytes(values[j], inputs[j].concrete) for _, j in views):
        # (numpy's call viewed its operands and wrote none: run on the operands themselves, its result on
        # this call views the caller's arrays as numpy's does, as the compiled calls' do)
        values = [t.concrete for t in inputs]
        args, kwargs = pytree.unflatten(treedef, iter(_fill(leaves, slots, values)))
        with np.errstate(all="ignore"):
            out = fn(*args, **kwargs)
        flat = []
        out_def = pytree.flatten(tuple(out) if named else out, flat)
        views = _views(flat, values)
    outs = ctx.emit_eager(call, inputs, flat, name, views)
    result = pytree.unflatten(out_def, iter(outs))
    return named(*result) if named else result


def _views(flat: list, values: list) -> list:
    """(output k, operand j) of each output of an eager call that shares memory with an operand."""
    return [(k, j) for k, r in enumerate(flat) for j, x in enumerate(values)
            if isinstance(r, np.ndarray) and isinstance(x, np.ndarray) and np.may_share_memory(r, x)]


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays of one dtype and shape hold the same bytes (NaNs and signed zeros too)."""
    return a.shape == b.shape and a.dtype == b.dtype and not a.dtype.hasobject and np.array_equal(
        *(np.ascontiguousarray(x).view(np.uint8) for x in (a, b)))


def _named_tuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _fill(leaves, slots, values):
    leaves = list(leaves)
    for s, v in zip(slots, values):
        leaves[s] = v
    return leaves


# ----------------------------------------------------------------- ufuncs

_REDUCE_UFUNC = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
                 "logical_and": "all", "logical_or": "any"}


def handle_ufunc(ctx, ufunc, method, inputs, kwargs):
    kwargs = {k: v for k, v in kwargs.items() if v is not np._NoValue}  # (numpy's "not given", as handle_function)
    out = kwargs.pop("out", None)
    if out is not None and not (isinstance(out, tuple) and all(o is None for o in out)):
        out = out if isinstance(out, tuple) else (out,)
        what = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        if ufunc is np.divmod and method == "__call__" and len(out) == 2 and not kwargs \
                and all(isinstance(o, Tracer) for o in out):
            _dry_run(np.divmod, inputs, {}, out)
            for o, r in zip(out, handle_ufunc(ctx, ufunc, method, inputs, {})):
                if r.dtype != o.dtype:
                    raise Fallback(f"np.divmod(..., out=...) of dtype {o.dtype} for a {r.dtype} result",
                                   user_location())
                _write_whole(ctx, o, r)
            return out
        if len(out) != 1 or ufunc.nout != 1:
            raise Fallback(f"{what}(..., out=(...)) with {max(len(out), ufunc.nout)} outputs", user_location())
        if not isinstance(out[0], Tracer):
            raise Fallback(f"{what}(..., out=...) writes into an array that is not traced", user_location())
        if method == "__call__" and "where" not in kwargs:
            return ufunc_into(ctx, ufunc, inputs, out[0], **kwargs)
        if method not in ("__call__", "reduce", "accumulate"):
            raise Fallback(f"{what}(..., out=...)", user_location())
        return _ufunc_method_into(ctx, ufunc, method, inputs, out[0], kwargs)
    name = _ALIASES.get(ufunc.__name__, ufunc.__name__)
    dtype = kwargs.pop("dtype", None) if method == "__call__" and set(kwargs) <= {"dtype", "casting"} \
        and kwargs.get("casting", "same_kind") == "same_kind" else None
    if dtype is not None:  # computed in `dtype`: the operands cast to it first, as numpy's loop does
        kwargs.pop("casting", None)
        dt = np.dtype(dtype)
        with np.errstate(all="ignore"):
            want = ufunc(*[x.concrete if isinstance(x, Tracer) else ctx.operand(x).concrete for x in inputs],
                         dtype=dt)  # numpy's errors for an impossible dtype
        inputs = [astype(ctx, ctx.operand(x), dt) for x in inputs]
        out = handle_ufunc(ctx, ufunc, method, inputs, kwargs)
        return out if out.dtype == np.asarray(want).dtype else astype(ctx, out, np.asarray(want).dtype)
    if method == "__call__" and not kwargs:
        if name == "divmod":  # (numpy's quotient and remainder: the floor_divide and remainder loops' own)
            return ctx.emit("floor_divide", list(inputs), {}), ctx.emit("remainder", list(inputs), {})
        if name == "matmul":
            return ctx.emit("matmul", list(inputs), {})
        op = OPS.get(name)
        if op is not None and op.category == ELEMENTWISE and ufunc.nout == 1:
            return ctx.emit(name, list(inputs), {})
    if method == "outer" and len(inputs) == 2 and not kwargs and OPS.get(name) is not None \
            and OPS[name].category == ELEMENTWISE and ufunc.nout == 1:  # a[..., None, ...] op b
        a, b = ctx.operand(inputs[0]), ctx.operand(inputs[1])
        a = reshape(ctx, a, tuple(a.shape) + (1,) * b.ndim) if b.ndim else a
        return ctx.emit(name, [a, b], {})
    if method == "at" and len(inputs) == 3 and not kwargs and isinstance(inputs[0], Tracer) \
            and OPS.get(name) is not None and OPS[name].category == ELEMENTWISE and ufunc.nin == 2:
        return _ufunc_at(ctx, name, *inputs)
    if method == "accumulate" and len(inputs) == 1 and set(kwargs) <= {"axis", "dtype"} and ufunc.nin == 2:
        a = ctx.operand(inputs[0])
        if a.ndim:
            attrs = {"ufunc": name, "axis": _norm_axis(operator.index(kwargs.get("axis", 0)), a.ndim)}
            if kwargs.get("dtype") is not None:
                attrs["dtype"] = np.dtype(kwargs["dtype"])
            return ctx.emit("accumulate", [a], attrs)
    if method == "reduce" and name in _REDUCE_UFUNC and len(inputs) == 1 and set(kwargs) <= {"dtype", "axis",
                                                                                            "keepdims"}:
        extra = {"dtype": kwargs["dtype"]} if "dtype" in kwargs else {}  # (initial=, where=: numpy's, eager)
        return reduce(ctx, _REDUCE_UFUNC[name], inputs[0], kwargs.get("axis", 0), kwargs.get("keepdims", False),
                      **extra)
    if method == "reduce" and len(inputs) == 1 and set(kwargs) <= {"axis", "keepdims"} and ufunc.nin == 2 \
            and ufunc.nout == 1 and name not in _REDUCE_UFUNC:  # (np.logaddexp.reduce: a numpy step of its shape)
        a, axis = ctx.operand(inputs[0]), kwargs.get("axis", 0)
        if a.ndim and (axis is None or _concrete_int(axis)):
            axes = None if axis is None else _norm_axis(operator.index(axis), a.ndim)
            if axes is None or a.shape[axes] != 0:  # (of nothing: numpy's identity, or its error)
                return ctx.emit("ufunc_reduce", [a], {"ufunc": name, "axis": axes,
                                                      "keepdims": bool(kwargs.get("keepdims", False))})
    return eager_call(ctx, getattr(ufunc, method) if method != "__call__" else ufunc, inputs, kwargs,
                      f"np.{name}" + ("" if method == "__call__" else f".{method}"))


def _dry_run(fn, args, kwargs, out: Tracer | tuple | None = None):
    """fn on the concrete values of its traced arguments (into fresh arrays
    like `out`, one or a tuple, when given), for numpy's own errors:
    casting, shapes, bounds."""
    leaves: list = []
    treedef = pytree.flatten((tuple(args), dict(kwargs)), leaves)
    concrete_args, concrete_kwargs = pytree.unflatten(treedef, iter([
        x.concrete if isinstance(x, Tracer) else x.ctx.hint(x.expr) if type(x) is SymInt
        else x.hint if type(x) is SymFloat else x for x in leaves]))  # (a dim's value: no array op of numpy's)
    if out is not None:
        concrete_kwargs["out"] = tuple(np.empty_like(o.concrete) for o in out) if isinstance(out, tuple) \
            else np.empty_like(out.concrete)
    with np.errstate(all="ignore"):
        fn(*concrete_args, **concrete_kwargs)


def _write_whole(ctx, target: Tracer, value) -> None:
    """target's every element takes value's (functionalized: jit/tracer.py
    write); whole slices, so no shape decision (target may have a
    data-dependent size)."""
    whole = tuple(("slice", 0, 1, d) for d in target.value.shape)
    ctx.write(target, ctx.emit("setitem", [target, value], {"items": whole}))


def _ufunc_method_into(ctx, ufunc, method, inputs, out: Tracer, kwargs):
    """ufunc.reduce/accumulate(..., out=o) and ufunc(..., out=o, where=m):
    numpy's errors from a dry run into a fresh array like o, then the result
    (where m is true, o's old values elsewhere) written into o.  A reduction
    or scan of another dtype than o's (numpy's loop would take o's) runs in
    numpy."""
    _dry_run(getattr(ufunc, method), inputs, kwargs, out)
    kwargs = dict(kwargs)
    mask = kwargs.pop("where", True) if method == "__call__" else True
    result = ctx.operand(handle_ufunc(ctx, ufunc, method, inputs, kwargs))
    if method != "__call__" and result.dtype != out.dtype:
        raise Fallback(f"np.{ufunc.__name__}.{method}(..., out=...) of dtype {out.dtype} for a {result.dtype} "
                       "result", user_location())
    if mask is not True:
        result = where(ctx, mask, result, out)
    _write_whole(ctx, out, result)
    return out


def _ufunc_at(ctx, name, a: Tracer, index, b):
    """np.<ufunc>.at(a, index, b): a takes the values of an unbuffered update
    (a numpy step; its errors from running it on the concrete values).
    Returns None, as ufunc.at does."""
    items = index if isinstance(index, tuple) else (index,)
    adv = _advanced(ctx, a, items)
    if adv is None:
        raise Fallback(f"np.{name}.at with a boolean mask", user_location())
    norm, arrays = adv
    new = ctx.emit("ufunc_at", [a, b] + arrays, {"items": norm, "ufunc": name})
    ctx.write(a, new)


def bincount(ctx, x, weights=None, minlength=0):
    """np.bincount: the counts' length, the larger of max(x) + 1 and
    minlength, a size the executable binds from the traced max
    (TraceContext.index_dim), the counts one np.add.at: no numpy step of
    data-dependent size.  An empty x, a negative value, weights of another
    length: numpy's own (a check on the size sends a call with a negative
    value to a trace that leaves it to numpy, which raises)."""
    x = ctx.operand(x)
    n = x.value.shape[0] if x.ndim == 1 else None
    if n is None or x.dtype.kind not in "iu" or not (isinstance(minlength, SymInt) or _concrete_int(minlength)
                                                     and minlength >= 0):
        return None  # (a dim as minlength, `C.shape[0]` clusters, stays a symbol)
    if weights is not None:
        weights = ctx.operand(weights)
        if weights.ndim != 1 or weights.dtype.kind not in "biuf" or \
                not ctx.env.compare("==", weights.value.shape[0], n, "np.bincount: weights as long as x"):
            return None
    if not ctx.env.compare(">=", n, 1, f"{user_location()}: np.bincount of a non-empty array"):
        return None
    if not ctx.env.compare(">=", _dim_expr(ctx.index_dim(x.min())), 0, "np.bincount: no negative value"):
        return None
    top = astype(ctx, x.max(), np.intp) + 1  # (in intp: a uint8's 255 + 1 is 256, not 0)
    size = _dim_expr(ctx.index_dim(np.maximum(top, minlength if isinstance(minlength, SymInt) else int(minlength))))
    if weights is None:
        out = ctx.emit("full", [], {"shape": (size,), "fill": 0, "dtype": np.dtype(np.intp)})
        _ufunc_at(ctx, "add", out, x, ctx.operand(np.intp(1)))
    else:
        out = ctx.emit("full", [], {"shape": (size,), "fill": 0.0, "dtype": np.dtype(np.float64)})
        _ufunc_at(ctx, "add", out, x, astype(ctx, weights, np.float64))
    return out


def ufunc_into(ctx, ufunc, inputs, out: Tracer, **kwargs):
    """`ufunc(*inputs, out=out)` and `out op= x`: numpy checks the casting
    (same_kind) and that the result broadcasts into `out` (its errors come
    from a dry run on the concrete values); the result is written into out."""
    _dry_run(ufunc, inputs, kwargs, out)
    _write_whole(ctx, out, handle_ufunc(ctx, ufunc, "__call__", inputs, kwargs))
    return out


# ------------------------------------------------------------- reductions

def _norm_axis(axis, ndim):
    if axis < -ndim or axis >= ndim:
        raise np.exceptions.AxisError(axis, ndim)
    return axis % ndim


def reduce(ctx, name, a, axis=None, keepdims=False, dtype=None, ddof=0):
    a = ctx.operand(a)
    nd = a.ndim
    attrs = {"keepdims": bool(keepdims)}
    if name in ("argmax", "argmin"):
        attrs["axis"] = None if axis is None else _norm_axis(operator.index(axis), nd)
    elif axis is None:
        attrs["axis"] = None
    else:
        axes = axis if isinstance(axis, tuple) else (axis,)
        norm = tuple(sorted(_norm_axis(operator.index(x), nd) for x in axes))
        if len(set(norm)) != len(norm):
            raise ValueError("duplicate value in 'axis'")
        attrs["axis"] = norm
    if dtype is not None:
        attrs["dtype"] = np.dtype(dtype)
    if isinstance(ddof, SymInt):  # (an int argument that changes: a symbol of the divisor, count - ddof)
        attrs["ddof"] = ddof.expr
    elif ddof:
        attrs["ddof"] = ddof
    if name in ("mean", "var", "std"):  # (numpy's warning of a count the shapes decide, at every call; one the
        # data decides, x[m].mean()'s, at the trace's only: deciding it would keep the mask read's size)
        reduced = range(nd) if attrs["axis"] is None else attrs["axis"]
        count = sympy.Mul(*[a.value.shape[k] for k in reduced]) - (ddof.expr if isinstance(ddof, SymInt) else ddof)
        dd = any(ctx.env.symbols[x].data_dependent for x in getattr(count, "free_symbols", ()))
        if not dd and ctx.env.compare("<=", count, 0, f"{user_location()}: the count of np.{name}'s slice"):
            ctx.warn_every_call("Mean of empty slice" if name == "mean" else "Degrees of freedom <= 0 for slice")
    if a.dtype.kind == "c" and name in ("sum", "mean") and dtype is None:
        # a complex sum is its parts' sums (numpy's adds the parts apart too,
        # in another order: a few ulp), so both are kernels' reductions
        parts = [reduce(ctx, name, ctx.emit(p, [a], {}, track=False), axis, keepdims) for p in ("real", "imag")]
        return ctx.emit("complex_of", parts, {})
    masked = _masked_reduction(ctx, name, a, attrs)
    if masked is not None:
        return masked
    return ctx.emit(name, [a], attrs)


def _masked_reduction(ctx, name, a, attrs):
    """x[m].sum() and x[m].mean() of a float x: sum(where(m, x, 0)) and that
    over m's count, with no data-dependent size (the mask read becomes dead;
    the sum is taken in another order than numpy's: a few ulp).  None when
    `a` is not a mask read, or for another reduction."""
    read = ctx.mask_reads.get(a.value.id)
    if (read is None or name not in ("sum", "mean") or a.dtype.kind != "f" or set(attrs) - {"axis", "keepdims"}
            or attrs["axis"] not in (None, (0,))):
        return None
    x, m = read
    if m.dtype != np.bool_ or m.ndim != x.ndim:
        return None
    for a_dim, b_dim in zip(m.value.shape, x.value.shape):  # (numpy requires it of a mask: a guard)
        ctx.env.unify(a_dim, b_dim, "a boolean mask's shape")
    zero = ctx.operand(np.zeros((), a.dtype))
    total = ctx.emit("sum", [ctx.emit("where", [m, x, zero], {})], {"axis": None, "keepdims": bool(attrs["keepdims"])})
    if name == "sum":
        return total
    count = ctx.emit("sum", [m], {"axis": None, "keepdims": bool(attrs["keepdims"])})
    with np.errstate(all="ignore"):
        return astype(ctx, ctx.emit("divide", [total, count], {}), a.dtype)


def _reduction_handler(name):
    def handler(ctx, a, axis=None, dtype=None, out=None, keepdims=False, ddof=0, where=None, **kw):
        if out is not None or kw:
            return None
        if where is not None:
            return _masked_sum_or_mean(ctx, name, a, axis, dtype, keepdims, where)
        if name in ("argmax", "argmin", "max", "min", "any", "all"):
            if dtype is not None:
                return None
            return reduce(ctx, name, a, axis, keepdims)
        return reduce(ctx, name, a, axis, keepdims, dtype=dtype, ddof=ddof if name in ("var", "std") else 0)
    return handler


def _masked_sum_or_mean(ctx, name, a, axis, dtype, keepdims, where):
    """np.sum / np.mean with where=: the sum of where(m, a, 0); the mean
    divides it by the count of m (broadcast to a's shape) as numpy does, in
    float64 for an integer a, the quotient cast back to a float a's dtype."""
    a = ctx.operand(a)
    if name not in ("sum", "mean") or dtype is not None or a.dtype.kind not in "iuf" or isinstance(where, bool):
        return None
    m = ctx.operand(where)
    if m.dtype != np.bool_:
        return None
    total = reduce(ctx, "sum", np.where(m, a, a.dtype.type(0)), axis, keepdims,
                   dtype=np.float64 if name == "mean" and a.dtype.kind in "iu" else None)
    if name == "sum":
        return total
    count = reduce(ctx, "sum", astype(ctx, broadcast_to(ctx, m, a.shape), np.intp), axis, keepdims)
    quotient = np.true_divide(total, count)
    return quotient if quotient.dtype == total.dtype else astype(ctx, quotient, total.dtype)


# ------------------------------------------------------------------ views

def _shape_arg(shape):
    if isinstance(shape, (int, np.integer, SymInt)):
        return (shape,)
    return tuple(shape)


def _dim_expr(d):
    if isinstance(d, SymInt):
        return d.expr
    if isinstance(d, sympy.Basic):  # (a dim's expression already)
        return d
    return int(operator.index(d))


def reshape(ctx, a, *shape, order="C"):
    if order != "C":
        return None
    a = ctx.operand(a)
    shape = _shape_arg(shape[0]) if len(shape) == 1 else tuple(shape)
    new = infer_reshape(ctx.env, a.value.shape, tuple(_dim_expr(d) for d in shape), user_location())
    return ctx.emit("reshape", [a], {"shape": new})


def transpose(ctx, a, *axes):
    a = ctx.operand(a)
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    if axes is None or axes == ():
        perm = tuple(reversed(range(a.ndim)))
    else:
        perm = tuple(_norm_axis(operator.index(x), a.ndim) for x in axes)
        if sorted(perm) != list(range(a.ndim)):
            raise ValueError("axes don't match array")
    if perm == tuple(range(a.ndim)):
        return a
    return ctx.emit("transpose", [a], {"perm": perm})


def swapaxes(ctx, a, axis1, axis2):
    a = ctx.operand(a)
    perm = list(range(a.ndim))
    i, j = _norm_axis(axis1, a.ndim), _norm_axis(axis2, a.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(ctx, a, tuple(perm))


def moveaxis(ctx, a, source, destination):
    a = ctx.operand(a)
    src = [_norm_axis(x, a.ndim) for x in _shape_arg(source)]
    dst = [_norm_axis(x, a.ndim) for x in _shape_arg(destination)]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [k for k in range(a.ndim) if k not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(ctx, a, tuple(order))


def expand_dims(ctx, a, axis):
    a = ctx.operand(a)
    axes = _shape_arg(axis)
    nd = a.ndim + len(axes)
    norm = sorted(_norm_axis(x, nd) for x in axes)
    if len(set(norm)) != len(norm):
        raise ValueError("repeated axis")
    dims = iter(a.value.shape)
    shape = tuple(1 if k in norm else next(dims) for k in range(nd))
    return ctx.emit("reshape", [a], {"shape": shape})


def squeeze(ctx, a, axis=None):
    a = ctx.operand(a)
    shape = a.value.shape
    if axis is None:
        axes = [k for k, d in enumerate(shape) if isinstance(d, int) and d == 1]
    else:
        axes = [_norm_axis(x, a.ndim) for x in _shape_arg(axis)]
        for k in axes:
            if not (isinstance(shape[k], int) and shape[k] == 1):
                raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    if not axes:
        return a
    return ctx.emit("reshape", [a], {"shape": tuple(d for k, d in enumerate(shape) if k not in axes)})


def ravel(ctx, a, order="C"):
    a = ctx.operand(a)
    if order == "C" and not a.in_order("C"):
        a = ctx.emit("astype", [a], {"dtype": a.dtype})  # (numpy's ravel copies what is not C-contiguous,
        # where a reshape could view it: writes into the result never reach the array)
    return reshape(ctx, a, -1, order=order)


def broadcast_to(ctx, a, shape, subok=False):
    a = ctx.operand(a)
    shape = tuple(ctx.env.simplify(_dim_expr(d)) for d in _shape_arg(shape))
    return ctx.emit("broadcast_to", [a], {"shape": shape})


def _is_basic_item(x) -> bool:
    return (x is None or x is Ellipsis or isinstance(x, (SymInt, np.integer)) or
            (isinstance(x, int) and not isinstance(x, bool)) or
            (isinstance(x, slice) and all(v is None or isinstance(v, (int, np.integer, SymInt)) and
                                          not isinstance(v, bool) for v in (x.start, x.stop, x.step))))


def _conv_item(x):
    if isinstance(x, slice):
        return slice(*(None if v is None else _dim_expr(v) for v in (x.start, x.stop, x.step)))
    if x is None or x is Ellipsis:
        return x
    return _dim_expr(x)


def _index_array(ctx, x):
    """An index item that is an array (or a list of ints), as a Tracer, or
    None when it is not one: bool arrays are masks (a data-dependent count)."""
    if isinstance(x, Tracer):
        return x if x.dtype.kind in "iu" else None
    if isinstance(x, list) and holds_traced(x):  # (a[[i, p]] with p traced: the list as a traced array)
        arr = array_of(ctx, x)
        return arr if arr.dtype.kind in "iu" else None
    if isinstance(x, (list, np.ndarray)):
        arr = np.asarray(x)
        if arr.dtype.kind in "iu" or (arr.size == 0 and arr.dtype.kind == "f" and isinstance(x, list)):
            return ctx.operand(arr.astype(np.intp, copy=False))
    return None


def _advanced(ctx, t, items):
    """(normalized items, index Tracers) of an index with integer arrays, or
    None when it has a boolean mask or anything else."""
    arrays, conv = [], []
    for x in items:
        if _is_basic_item(x):
            conv.append(_conv_item(x))
            continue
        a = _index_array(ctx, x)
        if a is None:
            return None
        conv.append(("array", len(arrays)))
        arrays.append(a)
    n_real = sum(1 for i in conv if i is not None and i is not Ellipsis)
    if n_real > t.ndim:
        raise IndexError(f"too many indices for array: array is {t.ndim}-dimensional, but {n_real} were indexed")
    if sum(1 for i in conv if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    expanded = []
    for i in conv:
        expanded += [slice(None)] * (t.ndim - n_real) if i is Ellipsis else [i]
    norm, ax = [], 0
    for i in expanded:
        if isinstance(i, tuple):  # ("array", k): numpy checks the bounds when it gathers
            norm.append(i)
        elif i is None:
            norm.append(("new",))
            continue
        else:
            it, _ = normalize_index(ctx.env, (t.value.shape[ax],), (i,), user_location())
            norm.append(it[0])
        ax += 1
    return tuple(norm), arrays


def _traced_int(ctx, x) -> bool:
    return type(x) is Tracer and x.ndim == 0 and x.dtype.kind in "iu" and not ctx.constant(x.value)


def _index_items(ctx, index) -> tuple:
    """The items of an index, each traced integer scalar in it (an int item
    or a slice bound: `logB[:, obs[t]]`, `x[np.argmax(v):]`) a size the
    executable binds to its value (TraceContext.index_dim): numpy's view, one
    trace for every value, where operator.index() would take a graph break
    per value."""
    items = index if isinstance(index, tuple) else (index,)
    if not any(_traced_int(ctx, x) or isinstance(x, slice) for x in items):
        return items
    out = []
    for x in items:
        if _traced_int(ctx, x):
            x = ctx.index_dim(x)
        elif isinstance(x, slice) and any(_traced_int(ctx, v) for v in (x.start, x.stop, x.step)):
            x = slice(*(ctx.index_dim(v) if _traced_int(ctx, v) else v for v in (x.start, x.stop, x.step)))
        out.append(x)
    return tuple(out)


def _mask_first(items) -> bool:
    """Whether an index is a boolean mask followed by ints and slices
    (`pos[hit, 1]`): numpy's `pos[:, 1][hit]`, the mask's dims first either
    way (setitem and getitem take it so: a read through the mask of that
    view, an update of it)."""
    return len(items) > 1 and isinstance(items[0], Tracer) and items[0].dtype == np.bool_ and items[0].ndim > 0 \
        and all(_is_basic_item(x) for x in items[1:])


def getitem(ctx, t, index):
    items = _index_items(ctx, index)
    if _mask_first(items):
        return getitem(ctx, getitem(ctx, t, (slice(None),) * items[0].ndim + tuple(items[1:])), items[0])
    if not all(_is_basic_item(x) for x in items):
        adv = _advanced(ctx, t, items)
        if adv is None:
            r = eager_call(ctx, operator.getitem, (t, index), {}, "getitem (boolean mask)")
            if len(items) == 1 and isinstance(items[0], Tracer) and isinstance(r, Tracer):
                # (detached Tracers: t may be written later; the read saw these values)
                ctx.mask_reads[r.value.id] = tuple(Tracer(ctx, u.value, u.concrete) for u in (t, items[0]))
            return r
        norm, arrays = adv
        return ctx.emit("index", [t] + arrays, {"items": norm})
    norm, shape = normalize_index(ctx.env, t.value.shape, tuple(_conv_item(x) for x in items), user_location())
    if len(norm) == t.ndim and all(it[0] == "slice" and it[1] == 0 and it[2] == 1 and
                                   ctx.env.simplify(it[3]) == ctx.env.simplify(d)
                                   for it, d in zip(norm, t.value.shape)):
        if t.ndim or any(x is Ellipsis for x in items):  # (x[:] and x[...]: a new view of all of x, as numpy's,
            # not x itself -- the caller setting the result's shape or flags would set x's)
            return ctx.emit("getitem", [t], {"items": norm, "shape": shape})
        # (z[()] of a 0-d array is its element: a numpy scalar, as numpy's)
    if not shape and t.ndim and any(x is Ellipsis for x in items) and norm and norm[-1][0] == "int":
        # (x[0, ...]: numpy's 0-d view of the element, not its scalar -- a write through it reaches x: the
        # element's slice of one, reshaped to ())
        k = max(i for i, it in enumerate(norm) if it[0] == "int")
        one = norm[:k] + (("slice", norm[k][1], 1, 1),) + norm[k + 1:]
        return reshape(ctx, ctx.emit("getitem", [t], {"items": one, "shape": (1,)}), ())
    return ctx.emit("getitem", [t], {"items": norm, "shape": shape})


def setitem(ctx, t: Tracer, index, value):
    """`t[index] = value`, functionalized: t (and the storage it views)
    takes a new value.  numpy's errors (bounds, broadcasting, casting) come
    from running the update on the concrete values first."""
    items = _index_items(ctx, index)
    if t.dtype.kind in "iub" and (isinstance(value, (list, tuple, int, float, complex, SymInt))
                                  and not isinstance(value, bool)):
        # (numpy converts a Python number, or a list of them, into t's dtype as Python numbers: `a[:2] = [300,
        # 1]` of an int8 a is its OverflowError, not 300 wrapped; a list of numbers, an array of t's dtype)
        _numbers_into(ctx, value, t.dtype)
        if isinstance(value, (list, tuple)) and not holds_traced(value):
            value = np.array(value, dtype=t.dtype)
    if isinstance(value, SymInt):
        value = ctx.operand(value)
    if len(items) == 1 and isinstance(items[0], Tracer) and items[0].dtype == np.bool_ \
            and 0 < items[0].ndim <= t.ndim and items[0].concrete.shape == t.concrete.shape[:items[0].ndim]:
        for a, b in zip(items[0].value.shape, t.value.shape):  # (numpy's mask has the shape of the dims it
            # indexes: one size, a data-dependent one's checked where it is made -- a BFS frontier's)
            ctx.env.unify(a, b, f"{user_location()}: a boolean mask of the dims it indexes")
    if all(_is_basic_item(x) for x in items):
        norm, _ = normalize_index(ctx.env, t.value.shape, tuple(_conv_item(x) for x in items), user_location())
        new = ctx.emit("setitem", [t, value], {"items": norm})
    elif (len(items) == 1 and isinstance(items[0], Tracer) and items[0].dtype == np.bool_
          and _scalar_like(value)):
        # x[mask] = v with a scalar v: where(mask, v, x) (numpy raises for a mask of another shape)
        mask = items[0]
        with np.errstate(all="ignore"):
            np.array(t.concrete)[mask.concrete] = value.concrete if isinstance(value, Tracer) else value
        v = ctx.emit("astype", [value], {"dtype": t.dtype}) if isinstance(value, Tracer) else \
            ctx.operand(np.asarray(value).astype(t.dtype)[()])  # (a numpy scalar: a kernel constant)
        if mask.ndim < t.ndim:  # (`x[rows] = 0` of a 2-D x: the mask picks whole rows, numpy's broadcast along the
            mask = reshape(ctx, mask, tuple(mask.value.shape) + (1,) * (t.ndim - mask.ndim))  # dims after its own)
        new = ctx.emit("where", [mask, v, t], {})
        if new.dtype != t.dtype:
            new = ctx.emit("astype", [new], {"dtype": t.dtype})
    elif len(items) == 1 and isinstance(items[0], Tracer) and items[0].dtype == np.bool_ and \
            isinstance(value, Tracer) and (new := _masked_update(ctx, t, items[0], value)) is not None:
        pass  # x[m] = f(x[m]): where(m, f(x), x)
    elif _mask_first(items):  # (`pos[hit, 1] = -pos[hit, 1]`: `pos[:, 1][hit] = ...`, through the view into t)
        view = getitem(ctx, t, (slice(None),) * items[0].ndim + tuple(items[1:]))
        setitem(ctx, view, items[0], value)
        return
    else:
        adv = _advanced(ctx, t, items)
        if adv is None:  # a boolean mask with an array of values: numpy's update in one step
            mask = [x for x in items if isinstance(x, Tracer) and x.dtype == np.bool_]
            arrays = [ctx.operand(x) for x in mask]
            k = iter(range(len(arrays)))
            norm = tuple(("array", next(k)) if any(x is m for m in mask) else ("raw", x) for x in items)
            if any(it[0] == "raw" for it in norm):
                raise Fallback("an assignment through a boolean mask mixed with other indices", user_location())
            new = ctx.emit("setitem", [t, value] + arrays, {"items": norm})
        else:
            norm, arrays = adv
            new = ctx.emit("setitem", [t, value] + arrays, {"items": norm})
    if new.dtype != t.dtype or ctx.env.simplify_shape(new.value.shape) != ctx.env.simplify_shape(t.value.shape):
        raise TraceError(f"setitem made {new.value.type_str()} from {t.value.type_str()}")
    ctx.write(t, new)


def _masked_update(ctx, t: Tracer, mask: Tracer, value: Tracer):
    """x[m] = f(x[m], c[m]) (and x[m] op= s) with f elementwise in reads
    through the same mask of arrays of its shape, and scalars: where(m,
    f(x, c), x), no data-dependent size (the mask reads become dead).
    None when `value` is anything else."""
    producers, memo = ctx.producers, {}

    def same(a: int, b: int) -> bool:  # (`x[x > 0] = f(x[x > 0])` computes its mask twice)
        pa, pb = producers.get(a), producers.get(b)
        return a == b or (pa is not None and pb is not None and pa.op == pb.op and pa.attrs == pb.attrs
                          and len(pa.inputs) == len(pb.inputs) and OPS[pa.op].category == ELEMENTWISE
                          and all(same(x.id, y.id) for x, y in zip(pa.inputs, pb.inputs)))

    def masked_read(vid):
        """The array (as it was when read) that value vid reads through the
        same mask, of the mask's shape (`x[m]`, `c[m]`), or None."""
        r = ctx.mask_reads.get(vid)
        if r is None or not same(r[1].value.id, mask.value.id) or r[0].ndim != mask.ndim:
            return None
        for a_dim, b_dim in zip(mask.value.shape, r[0].value.shape):  # (numpy requires it of a mask: a guard)
            ctx.env.unify(a_dim, b_dim, "a boolean mask's shape")
        return r[0]

    def rebuilt(vid):  # value vid recomputed over all of x, or None
        if vid in memo:
            return memo[vid]
        n = producers.get(vid)
        if (src := masked_read(vid)) is not None:
            r = src
        elif vid in ctx.scalars:
            v = n.out if n is not None else None
            r = Tracer(ctx, v, ctx.scalars[vid]) if v is not None else None
        elif n is None:
            r = None
        elif OPS[n.op].category == ELEMENTWISE:
            ins = [rebuilt(v.id) for v in n.inputs]
            r = None if any(x is None for x in ins) else ctx.emit(n.op, ins, dict(n.attrs), weak=n.out.weak)
        elif n.op == "setitem" and len(n.inputs) == 2 and all(
                it[0] == "slice" and it[1] == 0 and it[2] == 1 for it in n.attr("items")):  # x[...] = v
            v = rebuilt(n.inputs[1].id)
            r = None if v is None else ctx.emit("astype", [v], {"dtype": n.out.dtype})
        else:
            r = None
        memo[vid] = r
        return r
    fx = rebuilt(value.value.id)
    if fx is None or fx.value.shape != t.value.shape:
        return None
    with np.errstate(all="ignore"):  # numpy's errors for a value it cannot take
        np.array(t.concrete)[mask.concrete] = value.concrete
    new = ctx.emit("where", [mask, fx if fx.dtype == t.dtype else astype(ctx, fx, t.dtype), t], {})
    return new if new.dtype == t.dtype else astype(ctx, new, t.dtype)


def _concrete_int(v) -> bool:
    """A Python or numpy int, not a dim (which passes isinstance(v, int) as
    numpy's int would: jit/tracer.py SymInt)."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, SymInt)


def _scalar_like(v) -> bool:
    if isinstance(v, Tracer):
        return v.ndim == 0
    return type(v) in (bool, int, float) or isinstance(v, np.generic)


# ------------------------------------------------------------ combinators

def concatenate(ctx, arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    if out is not None or dtype is not None:
        return None
    arrays = [ctx.operand(x) for x in arrays]
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        arrays = [ravel(ctx, x) for x in arrays]
        axis = 0
    if any(x.ndim == 0 for x in arrays):
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = _norm_axis(axis, arrays[0].ndim)
    if len(arrays) == 1:
        return ctx.emit("astype", [arrays[0]], {"dtype": arrays[0].dtype})
    return ctx.emit("concatenate", arrays, {"axis": axis})


def stack(ctx, arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    if out is not None or dtype is not None:
        return None
    arrays = [ctx.operand(x) for x in arrays]
    if not arrays:
        raise ValueError("need at least one array to stack")
    first = arrays[0].value.shape
    for x in arrays[1:]:
        if x.ndim != len(first):
            raise ValueError("all input arrays must have the same shape")
        for a, b in zip(first, x.value.shape):
            if ctx.env.hint(a) != ctx.env.hint(b):
                raise ValueError("all input arrays must have the same shape")
            ctx.env.unify(a, b, "np.stack operands")
    axis = _norm_axis(axis, len(first) + 1)
    return concatenate(ctx, [expand_dims(ctx, x, axis) for x in arrays], axis=axis)


def split(ctx, a, indices_or_sections, axis=0):
    a = ctx.operand(a)
    axis = _norm_axis(axis, a.ndim)
    n = a.value.shape[axis]
    if isinstance(indices_or_sections, SymInt):  # (a count of parts that changes: the list's length, a guard)
        indices_or_sections = operator.index(indices_or_sections)
    if isinstance(indices_or_sections, Tracer):  # (split points of the data: numpy's call, its sizes)
        return None
    if _concrete_int(indices_or_sections):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("number sections must be larger than 0.")
        if ctx.env.hint(n) % k:
            raise ValueError("array split does not result in an equal division")
        ctx.env.decide(sympy.Eq(sympy.Mod(n, k), 0), f"{user_location()}: np.split into {k} parts")
        part = ctx.env.simplify(sympy.floor(sympy.sympify(n) / k)) if isinstance(n, sympy.Basic) else n // k
        bounds = [(part * i, part * (i + 1)) for i in range(k)]
    else:
        idx = [_dim_expr(i) for i in indices_or_sections]
        edges = [0] + idx + [n]
        bounds = list(zip(edges[:-1], edges[1:]))
    out = []
    for lo, hi in bounds:
        index = (slice(None),) * axis + (slice(SymInt.wrap(ctx, lo), SymInt.wrap(ctx, hi)),)
        out.append(getitem(ctx, a, index))
    return out


def where(ctx, condition, x=None, y=None):
    if x is None or y is None:
        return None
    return ctx.emit("where", [condition, x, y], {})


def clip(ctx, a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    if out is not None or kw:
        return None
    # numpy >= 2.1 also spells the bounds min= and max=; given twice, numpy raises
    if (min is not None and a_min is not None) or (max is not None and a_max is not None):
        return None
    a_min = a_min if min is None else min
    a_max = a_max if max is None else max
    if a_min is None and a_max is None:
        return None
    a = ctx.operand(a)
    if a.dtype.kind in "iu":  # (a Python int past the dtype's range: numpy's clip compares exactly, so a bound
        # below it (above, for the upper) bounds nothing, and one the other way is numpy's OverflowError)
        a_min = None if _python_int_past(ctx, a_min, a.dtype, -1) else a_min
        a_max = None if _python_int_past(ctx, a_max, a.dtype, 1) else a_max
        for bound in (a_min, a_max):
            python_int_into(ctx, bound, a.dtype)
        if a_min is None and a_max is None:
            return ctx.emit("astype", [a], {"dtype": a.dtype})  # (a new array, its values a's)
    if a_min is None:
        return ctx.emit("minimum", [a, a_max], {})
    if a_max is None:
        return ctx.emit("maximum", [a, a_min], {})
    a_min, a_max = ctx.operand(a_min), ctx.operand(a_max)
    # numpy's clip by bounds that are one value each (its loop's constant path) keeps a on a tie
    # (+0.0 against -0.0), by arrays of bounds takes the bound (codegen/emitters.py TIE_FIRST)
    one_value = all(d == 1 for v in (a_min, a_max) for d in v.shape)
    return ctx.emit("clip", [a, a_min, a_max], {"tie": "first"} if one_value else {})


def astype(ctx, a, dtype, order="K", casting="unsafe", subok=True, copy=True):
    dt = np.dtype(dtype)
    if dt.kind in "OSUV":
        raise Fallback(f"astype to unsupported dtype {dt}", user_location())
    if not copy and dt == a.dtype and isinstance(a, Tracer) and a.in_order(order):
        return a  # (a itself, as numpy's: writes into it reach a)
    return ctx.emit("astype", [a], {"dtype": dt})


def _python_int_past(ctx, v, dtype: np.dtype, side: int) -> bool:
    """Whether v, a Python int (or a dim), is below integer dtype's range
    (side -1) or above it (side 1); a dim's decided with a guard."""
    if not (type(v) is int or isinstance(v, SymInt)):
        return False
    info = np.iinfo(dtype)
    e = v.expr if isinstance(v, SymInt) else v
    where = f"{user_location()}: against the range of {dtype}"
    return ctx.env.compare("<", e, int(info.min), where) if side < 0 else ctx.env.compare(">", e, int(info.max), where)


def python_int_into(ctx, v, dtype) -> None:
    """numpy's OverflowError for a Python int (a dim's too) put into an
    integer dtype that cannot hold it (np.full(n, 300, np.int8), `a[0] =
    n` of an int8 a, a bound of np.clip): a dim's decided with a guard,
    where the wrapped value went through before."""
    dt = np.dtype(dtype)
    if dt.kind in "iu" and (_python_int_past(ctx, v, dt, -1) or _python_int_past(ctx, v, dt, 1)):
        raise OverflowError(f"Python integer {ctx.hint(v.expr) if isinstance(v, SymInt) else v} out of bounds "
                            f"for {dt}")


def _filled(fill):
    def handler(ctx, a, *args, dtype=None, order="K", subok=True, shape=None):
        value = fill if fill is not None else args[0]
        if fill is None:
            args = args[1:]
        if args:
            dtype = args[0]
        a = ctx.operand(a)
        shp = a.value.shape if shape is None else tuple(_dim_expr(d) for d in _shape_arg(shape))
        dt = np.dtype(dtype) if dtype is not None else a.dtype
        if isinstance(value, (Tracer, SymInt, SymFloat)):  # (a traced fill: np.full's)
            python_int_into(ctx, value, dt)
            return full(ctx, shp, value, dt)
        return ctx.emit("full", [], {"shape": tuple(ctx.env.simplify(d) for d in shp), "fill": value,
                                     "dtype": dt})
    return handler


def dot(ctx, a, b, out=None):
    if out is not None:
        return None
    a, b = ctx.operand(a), ctx.operand(b)
    if a.ndim == 0 or b.ndim == 0:
        return ctx.emit("multiply", [a, b], {})
    if a.ndim <= 2 and b.ndim <= 2:
        return ctx.emit("matmul", [a, b], {})
    return None


def einsum(ctx, subscripts, *operands, **kw):
    if kw or not isinstance(subscripts, str) or "..." in subscripts:
        return None
    return ctx.emit("einsum", list(operands), {"subscripts": subscripts.replace(" ", "")})


def full(ctx, shape, fill_value, dtype=None):
    """np.full: a constant fill, or a traced one (a runtime float, a value
    the function computed) broadcast into a fresh array of numpy's dtype
    (the fill's own: a Python float's is float64), cast as numpy casts it."""
    shp = _sizes(ctx, _shape_arg(shape))
    if isinstance(fill_value, (Tracer, SymInt, SymFloat)):
        if dtype is not None:
            python_int_into(ctx, fill_value, dtype)
        v = ctx.operand(fill_value)
        if v.ndim:
            return None
        dt = np.dtype(dtype) if dtype is not None else np.asarray(v.concrete).dtype
        return astype(ctx, broadcast_to(ctx, v, shp), dt)
    dt = np.dtype(dtype) if dtype is not None else np.asarray(fill_value).dtype
    return ctx.emit("full", [], {"shape": shp, "fill": fill_value, "dtype": dt})


def _sizes(ctx, dims) -> tuple:
    """The dims of an array to make, numpy's ValueError for a negative one
    (a symbolic one decided with a guard, or a check where it is bound)."""
    out = tuple(ctx.env.simplify(_dim_expr(d)) for d in dims)
    for d in out:
        if not ctx.env.compare(">=", d, 0, f"{user_location()}: the size of a new array"):
            raise ValueError("negative dimensions are not allowed")
    return out


def arange(ctx, start, stop=None, step=None, dtype=None):
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if not all(isinstance(v, (int, np.integer, SymInt)) and not isinstance(v, bool) for v in (start, stop, step)):
        return None
    start, stop, step = (_dim_expr(v) for v in (start, stop, step))
    if isinstance(step, sympy.Basic):
        return None
    if step == 0:
        raise ZeroDivisionError("division by zero")
    span = ctx.env.simplify(sympy.sympify(stop) - start)
    if ctx.env.compare("<=", span * step, 0, f"{user_location()}: np.arange length"):
        length = 0
    else:
        length = ctx.env.simplify(span if abs(step) == 1 and step > 0 else
                                  sympy.ceiling(sympy.sympify(span) / step))
    dt = np.dtype(dtype) if dtype is not None else np.arange(0).dtype
    return ctx.emit("arange", [], {"start": start, "stop": stop, "step": step, "dtype": dt,
                                   "length": length})


def _tri_indices(upper: bool):
    """np.triu_indices(n, k >= 0) and np.tril_indices(n, k <= 0) of a traced
    size n: a numpy step whose length follows from n, L(L + 1)/2 with L = n
    - |k| (a guard on L's sign; an eager call's length was data-dependent,
    and np.triu_indices of a dim specialized it: one compile per size)."""
    def handler(ctx, n, k=0, m=None):
        if m is not None or not isinstance(n, SymInt) or not isinstance(k, (int, np.integer)) \
                or isinstance(k, bool) or (k < 0 if upper else k > 0):
            return None
        side = ctx.env.simplify(_dim_expr(n) - abs(int(k)))
        what = f"{user_location()}: np.{'triu' if upper else 'tril'}_indices length"
        count = 0 if ctx.env.compare("<=", side, 0, what) else ctx.env.simplify(sympy.floor(side * (side + 1) / 2))
        return tuple(ctx.emit("tri_indices", [], {"n": _dim_expr(n), "k": int(k), "upper": upper, "count": count},
                              n_out=2))
    return handler


triu_indices, tril_indices = _tri_indices(True), _tri_indices(False)


def fftfreq(ctx, n, d=1.0, real=False):
    """np.fft.fftfreq(n, d) (rfftfreq when `real`) of a traced size n, as
    numpy computes it: the ints 0..N-1 (then -(n//2)..-1) times 1.0/(n*d);
    None where n is not a size (numpy's own call)."""
    if not isinstance(n, SymInt) or not isinstance(d, (int, float)) or isinstance(d, bool):
        return None
    val = 1.0 / (n * d)
    if real:
        k = arange(ctx, 0, n // 2 + 1)
    else:
        k = concatenate(ctx, [arange(ctx, 0, (n - 1) // 2 + 1), arange(ctx, -(n // 2), 0)])
    return k * val


def _fft(name):
    """np.fft.fft, ifft, rfft, irfft along one axis: a numpy step whose
    shape follows from the input's and n (an eager call's sizes would be
    data-dependent)."""
    def handler(ctx, a, n=None, axis=-1, norm=None, out=None):
        if out is not None or not isinstance(a, Tracer) or a.ndim == 0 or not (
                n is None or isinstance(n, (int, np.integer, SymInt)) and not isinstance(n, bool)) \
                or norm not in (None, "backward", "ortho", "forward"):
            return None
        return ctx.emit("fft", [a], {"fn": name, "n": None if n is None else _dim_expr(n),
                                     "axis": _norm_axis(operator.index(axis), a.ndim), "norm": norm})
    return handler


def sliding_window_view(ctx, x, window_shape, axis=None, *, subok=False, writeable=False):
    """A numpy step whose result is a read-only view of x (writes into it
    raise numpy's error), of the windows' shape; sizes may be traced."""
    if not isinstance(x, Tracer) or subok or writeable:
        return None
    window = tuple(window_shape) if isinstance(window_shape, (tuple, list)) else (window_shape,)
    axes = tuple(range(x.ndim)) if axis is None else tuple(axis) if isinstance(axis, (tuple, list)) else (axis,)
    if len(window) != len(axes) or not all(isinstance(w, (int, np.integer, SymInt)) and not isinstance(w, bool)
                                           for w in window):
        return None  # (numpy's error)
    if any(not isinstance(w, SymInt) and w < 0 for w in window):
        return None
    return ctx.emit("sliding_window", [x], {"window": tuple(_dim_expr(w) for w in window),
                                            "axis": tuple(_norm_axis(operator.index(a), x.ndim) for a in axes)})


def diagonal(ctx, a, offset=0, axis1=0, axis2=1):
    """np.diagonal / ndarray.diagonal: a numpy step whose result is numpy's
    read-only view of `a` (a kernel reads it through its strides); the
    diagonal's length a shape decision."""
    if not isinstance(a, Tracer) or isinstance(offset, bool) or not _concrete_int(offset):
        return None  # (a traced offset, or numpy's error)
    if a.ndim < 2:
        return None
    ax1, ax2 = _norm_axis(operator.index(axis1), a.ndim), _norm_axis(operator.index(axis2), a.ndim)
    if ax1 == ax2:
        return None
    return ctx.emit("diagonal", [a], {"offset": int(offset), "axis1": ax1, "axis2": ax2})


def diag(ctx, v, k=0):
    """np.diag of a matrix: its k-th diagonal (numpy's np.diagonal view); of
    a vector, the square matrix of side n + |k| with v on its k-th diagonal
    and zeros elsewhere (a where: an inf or a NaN of v stays on it)."""
    if not isinstance(v, Tracer) or not _concrete_int(k) or isinstance(k, bool):
        return None
    if v.ndim == 2:
        return diagonal(ctx, v, k)
    if v.ndim != 1:
        return None
    k = operator.index(k)
    size = v.shape[0] + abs(k)
    if abs(k):
        v = concatenate(ctx, [v, full(ctx, (abs(k),), 0, v.dtype)])
    i = arange(ctx, size)
    on = np.equal(np.subtract(expand_dims(ctx, i, 0), expand_dims(ctx, i, 1)), k)  # (column - row == k)
    return where(ctx, on, expand_dims(ctx, v, 1 if k >= 0 else 0), full(ctx, (), 0, v.dtype))


def trace(ctx, a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """np.trace / ndarray.trace: the sum of the diagonal(s) along its last axis."""
    d = diagonal(ctx, a, offset, axis1, axis2) if out is None else None
    return None if d is None else reduce(ctx, "sum", d, -1, False, dtype)


def take(ctx, a, indices, axis=None, out=None, mode="raise"):
    if out is not None or mode != "raise":
        return None
    a = ctx.operand(a)
    if axis is None:
        a, axis = ravel(ctx, a), 0
    axis = _norm_axis(operator.index(axis), a.ndim)
    return getitem(ctx, a, (slice(None),) * axis + (indices,))


def take_along_axis(ctx, arr, indices, axis=-1):
    arr, indices = ctx.operand(arr), ctx.operand(indices)
    if axis is None or indices.dtype.kind not in "iu":
        return None
    if arr.ndim != indices.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    return ctx.emit("take_along_axis", [arr, indices], {"axis": _norm_axis(operator.index(axis), arr.ndim)})


def norm(ctx, x, ord=None, axis=None, keepdims=False):
    """np.linalg.norm's 2-norms as numpy computes them, in traced ops: the
    square root of the sum of |x|² over the axes (all of them for ord None
    and no axis: the Frobenius norm of any array; one axis with ord None or
    2, two with ord None or "fro"); an integer x is taken as float64 first,
    as numpy does.  Other orders (1, inf, nuclear, a matrix's 2: its largest
    singular value) stay numpy's step."""
    if isinstance(ord, (Tracer, SymInt, SymFloat)) or isinstance(axis, (Tracer, SymInt, SymFloat)):
        return None
    x = ctx.operand(x)
    if x.dtype.kind in "biu":
        x = astype(ctx, x, np.float64)
    elif x.dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        return None  # (float16, longdouble: numpy's step)
    axes = None if axis is None else tuple(_shape_arg(axis))
    n_axes = x.ndim if axes is None else len(axes)
    if not (ord is None and (axes is None or n_axes in (1, 2)) or ord == 2 and n_axes == 1
            or ord == "fro" and n_axes == 2):
        return None
    sq = (np.conjugate(x) * x).real if x.dtype.kind == "c" else x * x
    return np.sqrt(reduce(ctx, "sum", sq, axes, keepdims))


def isclose(ctx, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """np.isclose by numpy's formula: |x - y| <= atol + rtol |y| where y is
    finite, or x == y (y taken as a float type first); with equal_nan, NaNs
    at the same places too."""
    if any(isinstance(v, (Tracer, SymInt, SymFloat)) for v in (rtol, atol, equal_nan)):
        return None
    x, y = (v if isinstance(v, (int, float, complex, Tracer)) else np.asanyarray(v) for v in (a, b))
    if isinstance(y, (Tracer, np.ndarray)):
        if y.dtype.kind not in "biufc":
            return None
        dt = np.result_type(y.dtype, 1.0)
        if y.dtype != dt:
            y = astype(ctx, y, dt) if isinstance(y, Tracer) else y.astype(dt)
    elif type(y) is int:
        y = float(y)
    if isinstance(x, (Tracer, np.ndarray)) and x.dtype.kind not in "biufc":
        return None
    result = (np.less_equal(np.abs(x - y), atol + rtol * np.abs(y)) & np.isfinite(y)) | (x == y)
    if equal_nan:
        result = result | (np.isnan(x) & np.isnan(y))
    return getitem(ctx, result, ())


def allclose(ctx, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """np.allclose: bool() of all of np.isclose -- a Python decision on the
    data (a graph break), as numpy's own returns a Python bool."""
    close = isclose(ctx, a, b, rtol, atol, equal_nan)
    return None if close is None else bool(reduce(ctx, "all", close))


def array_equal(ctx, a1, a2, equal_nan=False):
    """np.array_equal: False for other shapes (a decision on the dims), else
    bool() of all of a1 == a2 (or both NaN, with equal_nan): a graph break."""
    if isinstance(equal_nan, (Tracer, SymInt, SymFloat)):
        return None
    a1, a2 = (v if isinstance(v, Tracer) else np.asarray(v) for v in (a1, a2))
    if a1.shape != a2.shape:
        return False
    same = a1 == a2
    if equal_nan and any(v.dtype.kind in "fc" for v in (a1, a2)):
        same = same | (np.isnan(a1) & np.isnan(a2))
    return bool(reduce(ctx, "all", same))


def _shaped(ctx, fn: str, operands: list, kw: dict):
    """np.<fn> (shapes/ops.py NUMPY_SHAPED) as a numpy step whose shape follows
    from its operands'; numpy's errors from a dry run."""
    _dry_run(lambda *xs: getattr(np, fn)(*xs, **kw), operands, {})
    return ctx.emit("np_shaped", [ctx.operand(x) for x in operands], {"fn": fn, "kw": tuple(sorted(kw.items()))})


def _numbers(*vs) -> bool:
    return all(v is None or type(v) in (int, float) for v in vs)


def searchsorted(ctx, a, v, side="left", sorter=None):
    if sorter is not None or side not in ("left", "right") or np.ndim(a) != 1:
        return None
    return _shaped(ctx, "searchsorted", [a, v], {"side": side})


def argpartition(ctx, a, kth, axis=-1, kind="introselect", order=None):
    if order is not None or kind != "introselect" or type(kth) is not int or type(axis) is not int \
            or np.ndim(a) == 0:
        return None
    return _shaped(ctx, "argpartition", [a], {"kth": kth, "axis": axis})


def interp(ctx, x, xp, fp, left=None, right=None, period=None):
    if not _numbers(left, right, period) or np.ndim(xp) != 1 or np.ndim(fp) != 1:
        return None
    kw = {k: v for k, v in (("left", left), ("right", right), ("period", period)) if v is not None}
    return _shaped(ctx, "interp", [x, xp, fp], kw)


def _correlation(name, default):
    """np.convolve / np.correlate of 1-D operands (full, same or valid)."""
    def handler(ctx, a, v, mode=default):
        if mode not in ("full", "same", "valid") or np.ndim(a) != 1 or np.ndim(v) != 1:
            return None
        return _shaped(ctx, name, [a, v], {"mode": mode})
    return handler


def tile(ctx, A, reps):
    """np.tile by a count per axis (a constant or a size): A (with leading axes of 1 for
    reps longer than its ndim) with each axis k spread as (reps[k], size[k]),
    broadcast and reshaped to the products, then copied (numpy's result is
    its own array)."""
    tup = tuple(reps) if isinstance(reps, (tuple, list)) else (reps,)
    if not all(isinstance(t, SymInt) and ctx.env.compare(">=", t.expr, 0, f"{user_location()}: np.tile's count")
               or isinstance(t, (int, np.integer)) and not isinstance(t, bool) and t >= 0 for t in tup):
        return None  # (a size too, `np.tile(np.arange(W), H)` of an image's dims: a guard per size before)
    a = ctx.operand(A)
    if len(tup) > a.ndim:
        a = reshape(ctx, a, (1,) * (len(tup) - a.ndim) + tuple(a.shape))
    tup = (1,) * (a.ndim - len(tup)) + tuple(t if isinstance(t, SymInt) else int(t) for t in tup)
    spread = reshape(ctx, a, tuple(x for d in a.shape for x in (1, d)))
    wide = broadcast_to(ctx, spread, tuple(x for t, d in zip(tup, a.shape) for x in (t, d)))
    out = reshape(ctx, wide, tuple(t * d for t, d in zip(tup, a.shape)))
    return ctx.emit("astype", [out], {"dtype": out.dtype})


def cross(ctx, a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """np.cross of 3-vectors along the last axes, by numpy's formula (a1 b2
    - a2 b1, ...), the leading axes broadcast; 2-vectors and other axes stay
    numpy's step."""
    if axis is not None or (axisa, axisb, axisc) != (-1, -1, -1):
        return None
    a, b = ctx.operand(a), ctx.operand(b)
    if not (a.ndim and b.ndim and isinstance(a.shape[-1], int) and a.shape[-1] == 3
            and isinstance(b.shape[-1], int) and b.shape[-1] == 3):
        return None
    c = [getitem(ctx, v, (Ellipsis, k)) for v in (a, b) for k in range(3)]
    a0, a1, a2, b0, b1, b2 = c
    return stack(ctx, [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)


def kron(ctx, a, b):
    """np.kron of two vectors or two matrices: their outer product laid out
    block by block (a[i, j] * b)."""
    a, b = ctx.operand(a), ctx.operand(b)
    if a.ndim != b.ndim or a.ndim not in (1, 2):
        return None
    if a.ndim == 1:
        return reshape(ctx, outer(ctx, a, b), (a.shape[0] * b.shape[0],))
    blocks = getitem(ctx, a, (slice(None), None, slice(None), None)) * getitem(ctx, b, (None, slice(None), None,
                                                                                         slice(None)))
    return reshape(ctx, blocks, (a.shape[0] * b.shape[0], a.shape[1] * b.shape[1]))


def gradient(ctx, f, *varargs, axis=None, edge_order=1):
    """np.gradient with unit spacing and first-order edges, by numpy's
    formula along each axis: central differences (f[2:] - f[:-2]) / 2
    inside, one-sided at the two ends; an integer f as float64 (numpy's);
    a tuple of arrays for more than one axis (numpy 2's)."""
    if varargs or axis is not None or edge_order != 1:
        return None
    f = ctx.operand(f)
    if f.dtype.kind in "iu":
        f = astype(ctx, f, np.float64)
    elif f.dtype.kind not in "fc" or f.ndim == 0:
        return None
    outs = []
    for ax in range(f.ndim):
        if ctx.env.compare("<", f.value.shape[ax], 2, f"{user_location()}: np.gradient needs 2 elements along an axis"):
            return None  # (numpy's ValueError, from its own call)

        def part(lo, hi):
            return getitem(ctx, f, (slice(None),) * ax + (slice(lo, hi),))
        inner = (part(2, None) - part(None, -2)) / 2.0
        outs.append(concatenate(ctx, [(part(1, 2) - part(0, 1)) / 1.0, inner, (part(-1, None) - part(-2, -1)) / 1.0],
                                axis=ax))
    return outs[0] if len(outs) == 1 else tuple(outs)


def average(ctx, a, axis=None, weights=None, returned=False, *, keepdims=False):
    """np.average by numpy's formula: sum(a * w) / sum(w) in the result
    dtype (float64 at least for an integer a), 1-D weights along `axis`
    broadcast; weights summing to zero raise numpy's ZeroDivisionError (a
    decision on the data: a graph break)."""
    if returned or isinstance(axis, (tuple, list, Tracer, SymInt)):
        return None
    a = ctx.operand(a)
    if weights is None:
        return reduce(ctx, "mean", a, axis, keepdims)
    w = ctx.operand(weights)
    if a.dtype.kind not in "biuf" or w.dtype.kind not in "biuf":
        return None
    rd = np.result_type(a.dtype, w.dtype, "f8") if a.dtype.kind in "biu" else np.result_type(a.dtype, w.dtype)
    if a.shape != w.shape:
        if axis is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        if w.ndim != 1:
            raise TypeError("1D weights expected when shapes of a and weights differ.")
        if w.shape[0] != a.shape[axis]:
            raise ValueError("Length of weights not compatible with specified axis.")
        w = swapaxes(ctx, broadcast_to(ctx, w, (1,) * (a.ndim - 1) + tuple(w.shape)), -1, axis)
    w = astype(ctx, w, rd)
    scale = reduce(ctx, "sum", w, axis, keepdims)
    if bool(reduce(ctx, "any", scale == 0.0)):
        raise ZeroDivisionError("Weights sum to zero, can't be normalized")
    return reduce(ctx, "sum", astype(ctx, a, rd) * w, axis, keepdims) / scale


def unravel_index(ctx, indices, shape, order="C"):
    """np.unravel_index of traced flat indices into a shape (ints or dims),
    C order: each coordinate (i // the sizes after it) % its size, as intp
    (numpy scalars for a 0-d index); an index outside the size raises
    numpy's ValueError (a decision on the data: a graph break)."""
    if order != "C" or not isinstance(indices, Tracer) or indices.dtype.kind not in "iu":
        return None
    dims = _shape_arg(shape)
    if not all(isinstance(d, (int, np.integer, SymInt)) and not isinstance(d, bool) for d in dims):
        return None
    i = astype(ctx, indices, np.intp)
    size = 1
    for d in dims:
        size = size * d
    if bool(reduce(ctx, "any", (i < 0) | (i >= size))):  # (numpy's own call then raises its error)
        raise ValueError("index out of bounds in np.unravel_index")
    out, after = [], 1
    for d in reversed(dims):
        out.append(getitem(ctx, (i // after) % d, ()))
        after = after * d
    return tuple(reversed(out))


def polyval(ctx, p, x):
    """np.polyval of constant coefficients (a list or an array of numbers)
    at a traced x, by numpy's own Horner loop: y = zeros_like(x), then y = y
    * x + c for each coefficient c of np.asarray(p) (numpy scalars: their
    dtype promotes as in numpy)."""
    if isinstance(p, (Tracer, np.poly1d)) or isinstance(x, np.poly1d):
        return None
    if holds_traced(p):
        return None
    p = np.asarray(p)
    if p.ndim != 1 or p.dtype.kind not in "biufc":
        return None
    x = ctx.operand(x)
    y = _filled(0)(ctx, x)
    for c in p:
        y = y * x + c
    return y


def _outer(ctx, op, rows, cols):
    """op(rows[:, None], cols[None, :])."""
    return ctx.emit(op, [expand_dims(ctx, rows, 1), expand_dims(ctx, cols, 0)], {})


def _offset(k) -> bool:
    """A diagonal offset these build over the sizes: an int, or a size."""
    return _concrete_int(k) or type(k) is SymInt


def tri(ctx, N, M=None, k=0, dtype=float, *, like=None):
    """numpy's definition: m[i, j] = i >= j - k (k a size too: a KV cache's causal mask `np.tri(T, S, S - T)`
    was traced once per shape)."""
    if like is not None or not _offset(k):
        return None
    M = N if M is None else M
    rows, cols = arange(ctx, N), arange(ctx, -k, M - k)
    if rows is None or cols is None:
        return None
    return astype(ctx, _outer(ctx, "greater_equal", rows, cols), dtype)


def _triangle(lower):
    def handler(ctx, m, k=0):
        m = ctx.operand(m)
        if m.ndim < 2 or not _offset(k):
            return None
        # numpy: where(tri(..., k) , m, 0) for tril; where(tri(..., k - 1), 0, m) for triu
        mask = tri(ctx, m.shape[-2], m.shape[-1], k if lower else k - 1, bool)
        zero = ctx.operand(np.zeros(1, m.dtype))
        return ctx.emit("where", [mask, m, zero] if lower else [mask, zero, m], {})
    return handler


def eye(ctx, N, M=None, k=0, dtype=float, order="C", *, device=None, like=None):
    """m[i, j] = (i + k == j)."""
    if order != "C" or like is not None or device not in (None, "cpu") or not _offset(k):
        return None
    if isinstance(N, (int, np.integer, SymInt)) and isinstance(M, (int, np.integer, SymInt, type(None))):
        _sizes(ctx, (N,) if M is None else (N, M))
    rows, cols = arange(ctx, N), arange(ctx, N if M is None else M)
    if rows is None or cols is None:
        return None
    if type(k) is SymInt or k:
        rows = ctx.emit("add", [rows, k if type(k) is SymInt else int(k)], {})
    return astype(ctx, _outer(ctx, "equal", rows, cols), dtype)


def indices(ctx, dimensions, dtype=int, sparse=False):
    """np.indices of sizes (a shape with sizes of the trace): for each axis i,
    arange(dimensions[i]) along it, broadcast to the whole shape and stacked
    (numpy's definition); `sparse`: the aranges unbroadcast."""
    dims = tuple(dimensions)
    if not all(isinstance(d, (int, np.integer, SymInt)) and not isinstance(d, bool) for d in dims) \
            or np.dtype(dtype).kind not in "biufc":
        return None
    _sizes(ctx, dims)
    parts = []
    for i, d in enumerate(dims):
        a = arange(ctx, d)
        if a is None:
            return None
        a = reshape(ctx, astype(ctx, a, np.dtype(dtype)), tuple(d if j == i else 1 for j in range(len(dims))))
        parts.append(a if sparse else broadcast_to(ctx, a, dims))
    if sparse:
        return tuple(parts)
    return stack(ctx, parts) if parts else None


def linspace(ctx, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *, device=None):
    """numpy's formula (numpy/_core/function_base.py) for scalar ends and a
    count, one of them traced (a traced end, a symbolic count): arange(num)
    * step + start, the last element = stop; where the step is 0 (equal
    ends, a delta that underflows over the count) numpy's other branch,
    arange(num) / div * delta, chosen elementwise when that depends on the
    call."""
    real = (int, float, np.integer, np.floating)
    # (an end that is a size, `np.linspace(0, h - 1, n)` of a dim h: the traced int it is)
    start, stop = (ctx.operand(v) if isinstance(v, SymInt) else v for v in (start, stop))
    traced_ends = [v for v in (start, stop) if isinstance(v, Tracer)]
    if (not (isinstance(num, (SymInt, int, np.integer)) and not isinstance(num, bool)) or axis != 0
            or device not in (None, "cpu") or not (isinstance(num, SymInt) or traced_ends)
            or any(type(v) is bool or not (isinstance(v, real) or isinstance(v, Tracer) and v.ndim == 0
                                            and v.dtype.kind in "iuf") for v in (start, stop))
            or (dtype is not None and traced_ends and np.dtype(dtype).kind != "f")):
        return None
    if not isinstance(num, SymInt) and operator.index(num) < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    hint = num.ctx.hint(num.expr) if isinstance(num, SymInt) else int(num)
    dt = np.result_type(*[v.concrete if isinstance(v, Tracer) else v for v in (start, stop)], float(hint))
    div = num - 1 if endpoint else num
    if ctx.env.compare("<=", div.expr if isinstance(div, SymInt) else div, 0,
                       f"{user_location()}: np.linspace count"):
        return None
    y = astype(ctx, arange(ctx, num), dt)
    # the ends: traced values in dt, or dt's scalars (constants a kernel folds)
    first, last = (astype(ctx, v, dt) if isinstance(v, Tracer) else ctx.operand(dt.type(v)) for v in (start, stop))
    delta = (ctx.emit("subtract", [last, first], {}) if traced_ends
             else ctx.operand(np.subtract(stop, start, dtype=dt)))
    step = ctx.emit("divide", [delta, div], {})
    known = None if traced_ends else float(delta.concrete)
    if known is not None and known != 0 and abs(known) >= 1e-290:  # (the step is 0 for no count)
        y = ctx.emit("multiply", [y, step], {})
    else:  # numpy's branch for a zero step, elementwise where the step may or may not be 0
        small = ctx.emit("multiply", [ctx.emit("divide", [y, div], {}), delta], {})
        y = small if known == 0 else ctx.emit("where", [ctx.emit("equal", [step, dt.type(0)], {}), small,
                                                        ctx.emit("multiply", [y, step], {})], {})
    y = ctx.emit("add", [y, first], {})
    if endpoint:
        y[-1] = last
    if dtype is not None and np.dtype(dtype).kind in "iu":
        y = ctx.emit("floor", [y], {})
    if dtype is not None:
        y = astype(ctx, y, dtype)
    if retstep:
        return y, step
    return y


def logspace(ctx, start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """numpy's formula for a scalar base: base ** linspace(start, stop, num)
    (a traced end, a symbolic count: linspace above), then dtype."""
    if type(base) not in (int, float) and not isinstance(base, (np.integer, np.floating)):
        return None
    y = linspace(ctx, start, stop, num, endpoint, axis=axis)
    if y is None:
        return None
    y = np.power(base, y)
    return y if dtype is None else astype(ctx, y, dtype)


def _window(name: str):
    """np.hanning, np.hamming, np.blackman and np.bartlett of a size M, by
    numpy's definitions (numpy/lib/_function_base_impl.py): M as a float64,
    n = arange(1 - M, M, 2), then the window's cosines of pi * n / (M - 1);
    M below 2 decided (a guard): no element, or one 1.0."""
    def handler(ctx, M):
        if not isinstance(M, SymInt):
            return None
        if ctx.env.compare("<", M.expr, 2, f"{user_location()}: np.{name} of fewer than 2 points"):
            return None  # (numpy's own call: its empty or one-element window, for this size)
        f64 = np.float64
        n = astype(ctx, arange(ctx, 1 - M, M, 2), f64)
        m1 = ctx.emit("subtract", [astype(ctx, ctx.operand(M), f64), ctx.operand(f64(1.0))], {})

        def cos_of(scale):  # cos(scale * pi * n / (M - 1)), numpy's order of operations
            x = ctx.emit("multiply", [ctx.operand(f64(np.pi)), n], {}) if scale == 1 else \
                ctx.emit("multiply", [ctx.emit("multiply", [ctx.operand(f64(scale)), ctx.operand(f64(np.pi))], {}),
                                      n], {})
            return ctx.emit("cos", [ctx.emit("divide", [x, m1], {})], {})

        def plus(a, b, c):  # a + b * c
            return ctx.emit("add", [ctx.operand(f64(a)), ctx.emit("multiply", [ctx.operand(f64(b)), c], {})], {})
        if name == "hanning":
            return plus(0.5, 0.5, cos_of(1))
        if name == "hamming":
            return plus(0.54, 0.46, cos_of(1))
        if name == "blackman":
            return ctx.emit("add", [plus(0.42, 0.5, cos_of(1)),
                                    ctx.emit("multiply", [ctx.operand(f64(0.08)), cos_of(2.0)], {})], {})
        q = ctx.emit("divide", [n, m1], {})  # bartlett: where(n <= 0, 1 + n / (M - 1), 1 - n / (M - 1))
        one = ctx.operand(f64(1.0))
        return ctx.emit("where", [ctx.emit("less_equal", [n, ctx.operand(f64(0.0))], {}),
                                  ctx.emit("add", [one, q], {}), ctx.emit("subtract", [one, q], {})], {})
    handler.__name__ = name
    return handler


hanning, hamming, blackman, bartlett = (_window(n) for n in ("hanning", "hamming", "blackman", "bartlett"))


def array_of(ctx, a, dtype=None):
    """np.array of (nested) lists and tuples holding traced values: stacked.
    Into an integer dtype, numpy converts each number as a Python one, its
    OverflowError where the dtype cannot hold it: a Python int or a dim
    checked here (a dim with a guard), a traced number the dtype may not
    hold runs the call in numpy (its value decides)."""
    if dtype is not None and np.dtype(dtype).kind in "iub" and not isinstance(a, Stacked):
        _numbers_into(ctx, a, np.dtype(dtype))
    if isinstance(a, Stacked):  # (a list of a symbolic length: its array)
        out = a._array()
    elif isinstance(a, (list, tuple)):
        if not a:
            return ctx.operand(np.array(a, dtype=dtype))
        items = [array_of(ctx, x) for x in a]
        dt = np.result_type(*[t.dtype if not t.value.weak else t.concrete for t in items])
        out = stack(ctx, [astype(ctx, t, dt) if t.dtype != dt or t.value.weak else t for t in items])
    else:
        out = ctx.operand(a)
        if out.value.weak:  # a Python scalar or a dim: numpy's default dtype for it
            out = astype(ctx, out, np.asarray(out.concrete).dtype)
    return out if dtype is None or np.dtype(dtype) == out.dtype else astype(ctx, out, dtype)


def _numbers_into(ctx, a, dt: np.dtype) -> None:
    """The checks numpy's conversion of the numbers of (nested) lists `a`
    into integer or bool dtype dt makes (array_of)."""
    if isinstance(a, (list, tuple)):
        for x in a:
            _numbers_into(ctx, x, dt)
    elif isinstance(a, SymInt):
        python_int_into(ctx, a, dt)
    elif isinstance(a, Tracer):
        if not a.value.weak and a.ndim == 0 and not np.can_cast(a.dtype, dt, "safe"):
            raise Fallback(f"a traced {a.dtype} put into {dt} through a list (numpy checks its value's range)",
                           user_location())
    elif isinstance(a, (int, float, complex, np.generic)):
        np.array(a, dtype=dt)  # (numpy's OverflowError, ValueError or TypeError)


def atleast_nd(n):
    def handler(ctx, *arys):
        outs = []
        for a in arys:
            a = ctx.operand(a)
            if a.ndim >= n:
                outs.append(a)
            elif n == 1 or a.ndim == 0:
                outs.append(reshape(ctx, a, (1,) * (n - a.ndim) + tuple(a.shape)))
            elif n == 2:
                outs.append(expand_dims(ctx, a, 0))
            else:  # numpy's atleast_3d: (N,) -> (1, N, 1), (M, N) -> (M, N, 1)
                outs.append(reshape(ctx, a, (1,) + tuple(a.shape) + (1,)) if a.ndim == 1 else expand_dims(ctx, a, 2))
        return outs[0] if len(outs) == 1 else tuple(outs)
    return handler


def hstack(ctx, tup, *, dtype=None, casting="same_kind"):
    if dtype is not None:
        return None
    arrs = [atleast_nd(1)(ctx, a) for a in tup]
    return concatenate(ctx, arrs, axis=0 if arrs and arrs[0].ndim == 1 else 1)


def vstack(ctx, tup, *, dtype=None, casting="same_kind"):
    if dtype is not None:
        return None
    return concatenate(ctx, [atleast_nd(2)(ctx, a) for a in tup], axis=0)


def append(ctx, arr, values, axis=None):
    """np.append: both raveled and concatenated, or concatenated along axis."""
    arr, values = array_of(ctx, arr), array_of(ctx, values)
    if axis is None:
        return concatenate(ctx, [ravel(ctx, arr), ravel(ctx, values)], axis=0)
    return concatenate(ctx, [arr, values], axis=axis)


def column_stack(ctx, tup):
    arrs = [ctx.operand(a) for a in tup]
    return concatenate(ctx, [expand_dims(ctx, a, 1) if a.ndim < 2 else a for a in arrs], axis=1)


def repeat(ctx, a, repeats, axis=None):
    """One repeat count, a constant or a size (`np.repeat(np.arange(H), W)`
    of an image's dims: a guard per size before): x broadcast along a new
    axis and merged."""
    if isinstance(repeats, SymInt):
        if not ctx.env.compare(">=", repeats.expr, 0, f"{user_location()}: np.repeat's count"):
            return None  # (numpy's ValueError, from its own call)
    elif not _concrete_int(repeats) or isinstance(repeats, bool) or repeats < 0:
        return None
    else:
        repeats = int(repeats)
    a = ctx.operand(a)
    if axis is None:
        a, axis = ravel(ctx, a), 0
    axis = _norm_axis(operator.index(axis), a.ndim)
    x = expand_dims(ctx, a, axis + 1)
    shape = list(x.shape)
    shape[axis + 1] = repeats
    x = broadcast_to(ctx, x, tuple(shape))
    out_shape = list(a.shape)
    out_shape[axis] = a.shape[axis] * repeats
    # (a fresh array, as numpy's: copied before the merge, which then is a view, where numpy's
    # reshape of the broadcast would copy it once more)
    return reshape(ctx, astype(ctx, x, a.dtype), tuple(out_shape))


def outer(ctx, a, b, out=None):
    if out is not None:
        return None
    return ctx.emit("multiply", [expand_dims(ctx, ravel(ctx, a), 1), expand_dims(ctx, ravel(ctx, b), 0)], {})


def flip(ctx, m, axis=None):
    """A view with negative steps, as numpy's."""
    m = ctx.operand(m)
    axes = range(m.ndim) if axis is None else [_norm_axis(operator.index(x), m.ndim) for x in _shape_arg(axis)]
    return getitem(ctx, m, tuple(slice(None, None, -1) if k in axes else slice(None) for k in range(m.ndim)))


def _square_matrices(op):
    def handler(ctx, a, *args, **kwargs):
        a = ctx.operand(a)
        if args or kwargs or a.ndim < 2 or a.dtype.kind not in "f":
            return None
        if ctx.env.hint(a.value.shape[-1]) != ctx.env.hint(a.value.shape[-2]):
            return None  # numpy's error, from the eager call
        ctx.env.unify(a.value.shape[-1], a.value.shape[-2], f"np.linalg.{op} of square matrices")
        return ctx.emit(op, [a], {})
    return handler


def solve(ctx, a, b):
    """np.linalg.solve of a square matrix and a vector or a matrix: a numpy
    step of b's shape (numpy's errors, a singular matrix among them, from
    the concrete run while tracing and at run time)."""
    a, b = ctx.operand(a), ctx.operand(b)
    if a.ndim != 2 or b.ndim not in (1, 2) or a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        return None
    for d in (a.value.shape[1], b.value.shape[0]):
        if ctx.env.hint(d) != ctx.env.hint(a.value.shape[0]):
            return None  # (numpy's error, from the eager call)
        ctx.env.unify(a.value.shape[0], d, "np.linalg.solve of a square matrix")
    return ctx.emit("solve", [a, b], {})


def histogram(ctx, a, bins=10, range=None, density=None, weights=None):
    """np.histogram into a number of equal bins (traced or not): a numpy
    step of known shapes, (bins,) and (bins + 1,), where an eager call's
    were data-dependent.  Bin edges given as an array, or by a rule's name,
    run in numpy."""
    if not isinstance(bins, (int, np.integer, SymInt)) or isinstance(bins, bool) or not isinstance(a, Tracer):
        return None
    if range is not None and not (isinstance(range, tuple) and len(range) == 2
                                  and all(type(x) in (int, float) for x in range)):
        return None
    operands = [a] if weights is None else [a, ctx.operand(weights)]
    w = operands[-1].value
    if any(v.dtype.kind not in "iuf" for v in operands) or w.ndim != a.ndim or any(
            ctx.env.hint(d) != ctx.env.hint(e) for d, e in zip(a.value.shape, w.shape)):
        return None  # (numpy's error, or its result, from the eager call)
    for d, e in zip(a.value.shape, w.shape):
        ctx.env.unify(d, e, "np.histogram: weights of the data's shape")
    return tuple(ctx.emit("histogram", operands, {"bins": _dim_expr(bins), "range": range,
                                                  "density": None if density is None else bool(density)}, n_out=2))


def cov(ctx, m, *args, **kwargs):
    m = ctx.operand(m)
    if args or kwargs or m.ndim != 2 or m.dtype.kind not in "f":
        return None
    return ctx.emit("cov", [m], {})


def _along_axis(name):
    """np.cumsum, np.cumprod, np.sort, np.argsort: numpy steps of symbolic
    shape (the flattened array where axis is None)."""
    def handler(ctx, a, axis=-1 if name in ("sort", "argsort") else None, dtype=None, out=None, kind=None,
                order=None, *, stable=None):
        if out is not None or order is not None or (name in ("sort", "argsort") and dtype is not None):
            return None
        a = ctx.operand(a)
        if axis is None:
            a, axis = ravel(ctx, a), 0
        if a.ndim == 0:
            return None  # (numpy's error, or its special case, from the eager call)
        attrs = {"axis": _norm_axis(operator.index(axis), a.ndim)}
        if dtype is not None:
            attrs["dtype"] = np.dtype(dtype)
        if kind is not None or stable is not None:
            attrs["kind"] = "stable" if stable or kind in ("stable", "mergesort") else kind
        return ctx.emit(name, [a], attrs)
    return handler


def _sort_in_place(t, axis=-1, kind=None, order=None, *, stable=None):
    """ndarray.sort: the array's contents replaced by np.sort's."""
    result = _along_axis("sort")(t.ctx, t, axis, kind=kind, order=order, stable=stable)
    if result is None:  # (order=, or a 0-d array: numpy's sort of the caller's array, or its error)
        raise Fallback("ndarray.sort of a structured or 0-d array", user_location())
    t[...] = result


def around(ctx, a, decimals=0, out=None):
    """np.round: numpy's own steps -- rint(a * 10**d) / 10**d, or rint(a /
    10**-d) * 10**-d for negative d (the power a Python float, weak); an
    integer array with d >= 0 is a copy; a bool array's (numpy's rint of
    it, float16) only with d = 0 (numpy raises for another)."""
    a = ctx.operand(a)
    decimals = operator.index(decimals)
    if out is not None or a.dtype.kind not in "fiub" or (a.dtype.kind != "f" and decimals < 0) \
            or a.dtype.kind == "b" and decimals:
        return None
    if a.dtype.kind == "b":
        return np.rint(a)
    if a.dtype.kind != "f":
        return ctx.emit("astype", [a], {"dtype": a.dtype})
    if decimals == 0:
        return np.rint(a)
    f = float(10.0 ** abs(decimals))
    return np.rint(a * f) / f if decimals > 0 else np.rint(a / f) * f


def diff(ctx, a, n=1, axis=-1, **kw):
    """np.diff: numpy's own slices, a[1:] - a[:-1] (!= for bools), n times."""
    a = ctx.operand(a)
    n = operator.index(n)
    if kw or n < 0 or a.ndim == 0:
        return None  # (prepend/append, and numpy's errors, from the eager call)
    axis = _norm_axis(operator.index(axis), a.ndim)
    head = (slice(None),) * axis
    for _ in range(n):
        later, earlier = getitem(ctx, a, head + (slice(1, None),)), getitem(ctx, a, head + (slice(None, -1),))
        a = np.not_equal(later, earlier) if a.dtype == np.bool_ else np.subtract(later, earlier)
    return a


def roll(ctx, a, shift, axis=None):
    """np.roll by an int along one axis (or the flattened array): the two
    slices numpy copies, concatenated; the shift is taken modulo the dim
    (a symbolic one: a guard on whether the remainder is 0).  Shifts and
    axes in tuples (`np.roll(b, (dy, dx), axis=(0, 1))`), broadcast
    against each other as numpy does: one roll per pair."""
    if isinstance(shift, (tuple, list)) or isinstance(axis, (tuple, list)):
        shifts = list(shift) if isinstance(shift, (tuple, list)) else None
        axes = list(axis) if isinstance(axis, (tuple, list)) else None
        if axis is None or (shifts is not None and axes is not None and len(shifts) != len(axes)):
            return None  # (numpy's flattened broadcast, or its error)
        shifts = shifts if shifts is not None else [shift] * len(axes)
        axes = axes if axes is not None else [axis] * len(shifts)
        for sh, ax in zip(shifts, axes):
            a = roll(ctx, a, sh, ax)
            if a is None:
                return None
        return a
    a = ctx.operand(a)
    if not isinstance(shift, (int, np.integer, SymInt)) or isinstance(shift, bool) or \
            not (axis is None or _concrete_int(axis)) or a.ndim == 0:
        return None
    if axis is None:
        return reshape(ctx, roll(ctx, ravel(ctx, a), shift, 0), a.shape)
    axis = _norm_axis(operator.index(axis), a.ndim)
    n = a.shape[axis]
    if not n:
        return a.copy()
    k = SymInt.wrap(ctx, sympy.Mod(_dim_expr(shift), _dim_expr(n))) if isinstance(n, SymInt) or isinstance(
        shift, SymInt) else operator.index(shift) % n
    if not k:
        return a.copy()
    head = (slice(None),) * axis
    tail, front = getitem(ctx, a, head + (slice(n - k, None),)), getitem(ctx, a, head + (slice(None, n - k),))
    return concatenate(ctx, [tail, front], axis=axis)


def lexsort(ctx, keys, axis=-1):
    """np.lexsort of keys of one shape: a numpy step of that shape (it was
    an eager node of a size of its own, a guard per length)."""
    if isinstance(keys, Tracer):  # (an array of keys: its rows, the last the primary one; a 1-D array: one key)
        keys = [keys] if keys.ndim == 1 else [keys[i] for i in range(keys.shape[0])] \
            if keys.ndim > 1 and type(keys.shape[0]) is int else None
    if not isinstance(keys, (tuple, list)) or not keys or not _concrete_int(axis):
        return None
    keys = [ctx.operand(k) for k in keys]
    if keys[0].ndim == 0 or any(k.shape != keys[0].shape for k in keys):
        return None  # (numpy's error, or its special case, from the eager call)
    return ctx.emit("lexsort", keys, {"axis": _norm_axis(operator.index(axis), keys[0].ndim)})


def select(ctx, condlist, choicelist, default=0):
    """np.select: where(c, x, ...) from the last choice to the first, in the
    choices' and default's common dtype."""
    if not isinstance(condlist, (list, tuple)) or not isinstance(choicelist, (list, tuple)) or \
            len(condlist) != len(choicelist) or not condlist:
        return None
    conds = [ctx.operand(c) for c in condlist]
    if any(c.dtype != np.bool_ for c in conds):
        return None  # (numpy's TypeError, from the eager call)
    choices = [ctx.operand(x) for x in choicelist]
    # (numpy's select keeps Python scalars weak and makes the rest arrays, so strong)
    dt = np.result_type(*[c if type(c) in (int, float, complex) else np.asarray(c)
                          for c in [x.concrete for x in choices] + [ctx.operand(default).concrete]])
    result = astype(ctx, ctx.operand(default), dt) if isinstance(default, Tracer) else \
        ctx.operand(np.asarray(default).astype(dt)[()])
    for c, x in zip(reversed(conds), reversed(choices)):  # (where broadcasts them all, as numpy's select)
        result = where(ctx, c, x if x.dtype == dt else astype(ctx, x, dt), result)
    return result


def count_nonzero(ctx, a, axis=None, *, keepdims=False):
    """np.count_nonzero: a sum of a != 0, numpy's int64."""
    a = ctx.operand(a)
    flags = a if a.dtype == np.bool_ else np.not_equal(a, 0)
    return reduce(ctx, "sum", flags, axis, keepdims)


def _numpy_reduction(name):
    """np.median, np.nanmean, np.percentile (of a constant q) and the like: a
    numpy step with the reduction's symbolic shape (not an eager node of
    unknown sizes)."""
    def handler(ctx, a, *args, axis=None, keepdims=False, **kw):
        q = None
        if name in ("percentile", "quantile", "nanpercentile", "nanquantile"):
            if not args:
                return None
            if isinstance(args[0], (Tracer, SymInt, SymFloat)) or holds_traced(args[0]):
                q, args = array_of(ctx, args[0]), args[1:]  # (`[100 * alpha / 2, ...]` of a float argument)
                if q.dtype.kind not in "iuf":
                    return None
            elif np.ndim(args[0]):
                return None
            else:
                kw["q"], args = float(args[0]), args[1:]
        if args or set(kw) - {"q", "ddof", "method"} or kw.get("out") is not None:
            return None
        a = ctx.operand(a)
        if name in ("nanargmax", "nanargmin"):
            axes = None if axis is None else _norm_axis(operator.index(axis), a.ndim)
        elif axis is None:
            axes = None
        else:
            axes = tuple(sorted(_norm_axis(operator.index(x), a.ndim) for x in (axis if isinstance(axis, tuple)
                                                                                 else (axis,))))
        if q is not None:
            return ctx.emit("quantiles", [a, q], {"fn": name, "axis": axes, "keepdims": bool(keepdims), **kw})
        return ctx.emit("np_reduce", [a], {"fn": name, "axis": axes, "keepdims": bool(keepdims), **kw})
    return handler


def ptp(ctx, a, axis=None, out=None, keepdims=False):
    """np.ptp: max - min, numpy's own formula (kernels)."""
    if out is not None:
        return None
    return np.subtract(reduce(ctx, "max", a, axis, keepdims), reduce(ctx, "min", a, axis, keepdims))


def nansum(ctx, a, axis=None, dtype=None, out=None, keepdims=False, **kw):
    """np.nansum: the sum with NaNs as 0, numpy's own formula (a kernel)."""
    a = ctx.operand(a)
    if out is not None or kw or dtype is not None:
        return None
    if a.dtype.kind in "fc":
        a = where(ctx, np.isnan(a), 0, a)
    return reduce(ctx, "sum", a, axis, keepdims)


def nan_to_num(ctx, x, copy=True, nan=0.0, posinf=None, neginf=None):
    """np.nan_to_num of a float array: numpy's three copyto steps (NaN, +inf,
    -inf, each where the array held one before any: a NaN made infinite
    stays) as wheres; ints and bools are themselves (a copy)."""
    x = ctx.operand(x)
    traced = any(isinstance(v, (Tracer, SymInt, SymFloat)) for v in (nan, posinf, neginf))
    if x.dtype.kind not in "fiub" or traced:
        return None
    if x.dtype.kind != "f":
        return x.copy() if copy else x
    info = np.finfo(x.dtype)
    d = where(ctx, np.equal(x, -np.inf), info.min if neginf is None else neginf, x)
    d = where(ctx, np.equal(x, np.inf), info.max if posinf is None else posinf, d)
    d = where(ctx, np.isnan(x), nan, d)
    d = d if d.dtype == x.dtype else astype(ctx, d, x.dtype)
    if not copy:
        x[...] = d
        return x
    return d


def pad(ctx, array, pad_width, mode="constant", **kw):
    """np.pad with static widths, symbolic dims staying symbolic: in
    'constant' mode a full array of the constant with the array written
    into its middle (numpy's own steps); in 'edge', 'wrap', 'reflect' and
    'symmetric' modes each axis in turn (as numpy pads) the concatenation of
    slices of the array padded so far (`_pad_axis`)."""
    a = ctx.operand(array)
    value = kw.pop("constant_values", 0)
    if mode in _PAD_SLICES and not kw and a.ndim:
        widths = _pad_widths(pad_width, a.ndim)
        for axis, (lo, hi) in enumerate(widths or ()):
            a = _pad_axis(ctx, a, axis, lo, hi, mode)
            if a is None:
                return None  # (numpy's: widths past what one reflection covers, an empty axis)
        return a if widths is not None else None
    if mode != "constant" or kw or isinstance(value, (Tracer, SymInt, SymFloat)) \
            or not isinstance(value, (int, float, bool, np.generic)) or a.ndim == 0:
        return None
    widths = _pad_widths(pad_width, a.ndim)
    if widths is None:
        return None
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(a.shape, widths))
    out = full(ctx, shape, value, a.dtype)
    out[tuple(slice(lo, lo + d) for d, (lo, _) in zip(a.shape, widths))] = a
    return out


def _pad_widths(pad_width, ndim) -> list | None:
    """np.pad's widths as (before, after) per axis, or None where one is traced."""
    flat: list = []
    pytree.flatten(pad_width, flat)
    if any(isinstance(w, (Tracer, SymInt, SymFloat)) for w in flat):
        return None
    widths = np.round(np.asarray(pad_width)).astype(np.intp)
    if widths.ndim < 3 and widths.size == 1:
        widths = widths.ravel().repeat(2)
    elif widths.ndim < 3 and widths.size == 2 and widths.shape != (2, 1):
        widths = widths.ravel()
    if widths.size and widths.min() < 0:
        raise ValueError("index can't contain negative values")
    return np.broadcast_to(widths, (ndim, 2)).tolist()  # (numpy's own error for another shape)


# np.pad's modes as slices of an axis of n elements: (the `lo` elements before
# it, the `hi` after it, each reversed or not), and the least n each needs
_PAD_SLICES = {
    "edge": (lambda n, lo: (0, 1), lambda n, hi: (n - 1, n), False, lambda lo, hi: 1),
    "wrap": (lambda n, lo: (n - lo, n), lambda n, hi: (0, hi), False, lambda lo, hi: max(lo, hi)),
    "reflect": (lambda n, lo: (1, lo + 1), lambda n, hi: (n - 1 - hi, n - 1), True, lambda lo, hi: max(lo, hi) + 1),
    "symmetric": (lambda n, lo: (0, lo), lambda n, hi: (n - hi, n), True, lambda lo, hi: max(lo, hi)),
}


def _pad_axis(ctx, a, axis, lo, hi, mode):
    """`a` padded along `axis` in `mode` (_PAD_SLICES): the array between
    its slices (an edge element broadcast to its width), when the axis is
    long enough for one slice to cover each width (a guarded decision on a
    symbolic axis); else None."""
    if not lo and not hi:
        return a
    before, after, backwards, least = _PAD_SLICES[mode]
    n = a.shape[axis]
    if not ctx.env.compare(">=", n.expr if isinstance(n, SymInt) else n, least(lo, hi),
                           f"np.pad(mode={mode!r}): an axis one {mode} covers"):
        return None
    parts = []
    for width, (start, stop) in ((lo, before(n, lo)), (hi, after(n, hi))):
        if width:
            part = a[(slice(None),) * axis + (slice(start, stop),)]
            if backwards:
                part = part[(slice(None),) * axis + (slice(None, None, -1),)]
            if mode == "edge":
                part = np.broadcast_to(part, a.shape[:axis] + (width,) + a.shape[axis + 1:])
            parts.append(part)
        else:
            parts.append(None)
    return np.concatenate([p for p in (parts[0], a, parts[1]) if p is not None], axis=axis)


def angle(ctx, z, deg=False):
    """numpy's np.angle: arctan2 of the parts (of 0 and z for a real z)."""
    z = ctx.operand(z)
    zimag, zreal = (PROPERTIES["imag"](z), PROPERTIES["real"](z)) if z.dtype.kind == "c" else (0, z)
    a = np.arctan2(zimag, zreal)
    return a * (180 / np.pi) if deg else a


def _conjugate(t):
    """ndarray.conj(): a complex array's conjugate; a real array itself (numpy returns self)."""
    return np.conjugate(t) if t.dtype.kind == "c" else t


def _shape(ctx, a):
    return ctx.operand(a).shape


FUNCTIONS = {
    np.reshape: reshape, np.transpose: transpose, np.swapaxes: swapaxes, np.moveaxis: moveaxis,
    np.expand_dims: expand_dims, np.squeeze: squeeze, np.ravel: ravel, np.broadcast_to: broadcast_to,
    np.concatenate: concatenate, np.stack: stack, np.split: split, np.where: where, np.clip: clip,
    np.zeros_like: _filled(0), np.ones_like: _filled(1), np.empty_like: _filled(0),
    np.full_like: _filled(None), np.dot: dot, np.take: take, np.take_along_axis: take_along_axis,
    np.bincount: bincount,
    np.triu: _triangle(False), np.tril: _triangle(True), np.hstack: hstack, np.vstack: vstack,
    np.column_stack: column_stack, np.repeat: repeat, np.outer: outer, np.flip: flip,
    np.fliplr: lambda ctx, m: flip(ctx, m, 1), np.flipud: lambda ctx, m: flip(ctx, m, 0),
    np.linalg.cholesky: _square_matrices("cholesky"), np.linalg.inv: _square_matrices("inv"), np.cov: cov,
    np.linalg.solve: solve, np.linalg.norm: norm, np.polyval: polyval,
    np.isclose: isclose, np.allclose: allclose, np.array_equal: array_equal, np.searchsorted: searchsorted,
    np.argpartition: argpartition, np.interp: interp, np.convolve: _correlation("convolve", "full"),
    np.correlate: _correlation("correlate", "valid"), np.tile: tile, np.cross: cross, np.kron: kron,
    np.gradient: gradient, np.average: average, np.unravel_index: unravel_index,
    np.histogram: histogram, np.atleast_1d: atleast_nd(1), np.atleast_2d: atleast_nd(2),
    np.atleast_3d: atleast_nd(3), np.einsum: einsum, np.astype: astype,
    np.lexsort: lexsort, np.append: append, np.angle: angle, np.round: around, np.around: around, np.diff: diff,
    np.roll: roll, np.select: select,
    np.count_nonzero: count_nonzero, np.ptp: ptp, np.nansum: nansum, np.nan_to_num: nan_to_num, np.pad: pad,
    np.shape: _shape,
    np.ndim: lambda ctx, a: ctx.operand(a).ndim,
    np.size: lambda ctx, a, axis=None: ctx.operand(a).size if axis is None else ctx.operand(a).shape[axis],
}


_ALIASES = {"degrees": "rad2deg", "radians": "deg2rad"}  # (ufuncs of one loop under two names)


def _fix(ctx, x, out=None):
    """np.fix of a float array: its trunc (numpy's ceil below 0, floor above)."""
    x = ctx.operand(x)
    return ctx.emit("trunc", [x], {}) if out is None and x.dtype.kind == "f" else None


def _sinc(ctx, x):
    """np.sinc: numpy's definition, sin(y) / y of x = pi * x (a float), y = where(x, x, its dtype's eps)."""
    x = ctx.operand(x)
    if x.dtype.kind not in "iuf":
        return None
    x = np.pi * x
    y = np.where(x, x, np.finfo(x.dtype).eps)
    return np.sin(y) / y


FUNCTIONS[np.fix] = _fix
FUNCTIONS[np.sinc] = _sinc


def _i0(ctx, x):
    """np.i0 by numpy's own method (its Chebyshev series of |x| below and
    above 8, numpy's coefficient tables): each side computed where it is
    taken, on an operand the other side's points leave harmless, and
    selected; the result of x's float dtype, as numpy's piecewise gives."""
    from numpy.lib import _function_base_impl as impl
    low_c, high_c = getattr(impl, "_i0A", None), getattr(impl, "_i0B", None)
    if low_c is None or high_c is None:
        return None
    x = ctx.operand(x)
    if x.dtype.kind == "c":
        raise TypeError("i0 not supported for complex values")
    if x.dtype.kind not in "fiub":
        return None
    if x.dtype.kind != "f":
        x = astype(ctx, x, np.float64)
    x = np.abs(x)
    low = x <= 8.0

    def series(t, vals):  # (the recurrence b0 = t * b1 - b2 + c, then (b0 - b2) / 2, as numpy's _chbevl)
        b0, b1 = vals[0], 0.0
        for c in vals[1:]:
            b2, b1 = b1, b0
            b0 = t * b1 - b2 + c
        return 0.5 * (b0 - b2)
    x1, x2 = np.where(low, x, 0.0), np.where(low, 9.0, x)
    y = np.where(low, np.exp(x1) * series(x1 / 2.0 - 2, low_c),
                 np.exp(x2) * series(32.0 / x2 - 2.0, high_c) / np.sqrt(x2))
    return y if y.dtype == x.dtype else astype(ctx, y, x.dtype)


def kaiser(ctx, M, beta):
    """np.kaiser of a size M (numpy's definition, in float64: i0(beta *
    sqrt(1 - ((n - alpha) / alpha) ** 2)) / i0(beta), n = arange(M), alpha
    = (M - 1) / 2); M of 1 decided (a guard): numpy's one-element window."""
    if not isinstance(M, SymInt) or not isinstance(beta, (int, float, np.integer, np.floating, Tracer)):
        return None
    if ctx.env.compare("==", M.expr, 1, f"{user_location()}: np.kaiser of one point"):
        return None
    f64 = np.dtype(np.float64)
    m = astype(ctx, ctx.operand(M), f64)
    b = astype(ctx, ctx.operand(beta), f64) if isinstance(beta, Tracer) else ctx.operand(np.float64(beta))
    n = astype(ctx, arange(ctx, M), f64)
    alpha = (m - 1) / 2.0
    return np.i0(b * np.sqrt(1 - ((n - alpha) / alpha) ** 2.0)) / np.i0(b)


FUNCTIONS[np.i0] = _i0


def _dtype_of(x):
    """What numpy's dtype rules see of x: a traced array's dtype, a Python
    number of the trace's kind (weak), anything else as it is."""
    if isinstance(x, Tracer):
        return dummy(x.value)
    if isinstance(x, (SymInt, SymFloat)):
        return 0 if isinstance(x, SymInt) else 0.0
    return x


# (answered from dtypes alone: numpy's call met a traced array and ran the whole signature in numpy, probe 22)
FUNCTIONS[np.result_type] = lambda ctx, *xs: np.result_type(*map(_dtype_of, xs))
FUNCTIONS[np.iscomplexobj] = lambda ctx, x: np.iscomplexobj(_dtype_of(x))
FUNCTIONS[np.isrealobj] = lambda ctx, x: np.isrealobj(_dtype_of(x))
FUNCTIONS[np.can_cast] = lambda ctx, from_, to, casting="safe": np.can_cast(_dtype_of(from_), _dtype_of(to), casting)
for _name in ("sum", "mean", "max", "min", "prod", "var", "std", "any", "all", "argmax", "argmin"):
    FUNCTIONS[getattr(np, _name)] = _reduction_handler(_name)
for _name in ("cumsum", "cumprod", "sort", "argsort"):
    FUNCTIONS[getattr(np, _name)] = _along_axis(_name)
for _name in NUMPY_REDUCTIONS:
    FUNCTIONS[getattr(np, _name)] = _numpy_reduction(_name)
FUNCTIONS[np.amax] = _reduction_handler("max")
FUNCTIONS[np.amin] = _reduction_handler("min")


def _into(ctx, func, args, kwargs):
    """`func(..., out=o)` of a traced o, for a numpy function that is not a
    ufunc: numpy's errors from a dry run into a fresh array like o, then the
    result without out written into o (functionalized) and o returned.  A
    result of another dtype than o's (numpy would compute in o's) runs the
    function in numpy."""
    out = kwargs["out"]
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    name = _fn_name(func)
    if not isinstance(target, Tracer):
        raise Fallback(f"{name}(..., out=...) writes into an array that is not traced", user_location())
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    _dry_run(func, args, rest, target)
    result = ctx.operand(handle_function(ctx, func, args, rest))
    if result.dtype != target.dtype:
        raise Fallback(f"{name}(..., out=...) of dtype {target.dtype} for a {result.dtype} result", user_location())
    _write_whole(ctx, target, result)
    return target


NONE = object()  # a handler's result for a numpy function that returns None (it wrote its operand)


def copyto(ctx, dst, src, casting="same_kind", **kw):
    """np.copyto: dst takes src's values (where `where` is true), after
    numpy's casting and broadcasting checks on the concrete values."""
    mask = kw.pop("where", True)
    if not isinstance(dst, Tracer) or kw:
        return None
    _dry_run(lambda d, s, m: np.copyto(np.empty_like(d), s, casting=casting, where=m), (dst, src, mask), {})
    value = ctx.operand(src)
    if mask is not True:
        value = where(ctx, mask, value, dst)
    _write_whole(ctx, dst, value if value.dtype == dst.dtype else astype(ctx, value, dst.dtype))
    return NONE


def _numpy_update(name):
    """np.put, np.place, np.putmask, np.put_along_axis, np.fill_diagonal
    (which write their first operand and return None) and np.partition: a
    numpy step (shapes/ops.py np_update) of the operand's shape, which the
    operand then is (an update); numpy's errors from a dry run.  Options
    (mode, wrap, axis, kth) are the step's attrs: traced ones run numpy's
    function eagerly."""
    sig = inspect.signature(getattr(np, name))
    names = NUMPY_UPDATES.get(name, ())

    def handler(ctx, a, *args, **kwargs):
        try:
            bound = sig.bind(a, *args, **kwargs)
        except TypeError:
            return None
        first = next(iter(sig.parameters))
        operands = [bound.arguments[n] for n in names]
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in bound.arguments.items()
              if k != first and k not in names}
        if not isinstance(a, Tracer) or a.ndim == 0 or not all(
                type(v) in (int, bool, str, tuple, type(None)) and all(type(u) is int for u in
                                                                       (v if type(v) is tuple else ()))
                for v in kw.values()):
            return None
        fn = getattr(np, name)
        _dry_run(lambda x, *r: fn(x if name in NUMPY_SAME_SHAPE else np.array(x, copy=True), *r, **kw),
                 (a, *operands), {})
        new = ctx.emit("np_update", [a] + [ctx.operand(x) for x in operands],
                       {"fn": name, "kw": tuple(sorted(kw.items()))})
        if name in NUMPY_SAME_SHAPE:
            return new
        ctx.write(a, new)
        return NONE
    return handler


def _partition_in_place(t, kth, axis=-1, kind="introselect", order=None):
    """ndarray.partition: the array's contents replaced by np.partition's."""
    result = FUNCTIONS[np.partition](t.ctx, t, kth, axis, kind, order)
    if result is None:
        raise Fallback("ndarray.partition of a 0-d array or with options a numpy step cannot hold (a traced kth)",
                       user_location())
    t[...] = result


def _put_method(t, indices, values, mode="raise"):
    handle_function(t.ctx, np.put, (t, indices, values), {"mode": mode})


def _fill_with(t, value):
    """ndarray.fill: every element takes the value (cast as numpy casts it)."""
    setitem(t.ctx, t, Ellipsis, value)


FUNCTIONS[np.copyto] = copyto
FUNCTIONS[np.copy] = lambda ctx, a, order="K", subok=False: (  # (a copy: a.copy()'s, not a numpy step)
    ctx.emit("astype", [a], {"dtype": a.dtype}) if isinstance(a, Tracer) and not a.value.weak and order != "F"
    else None)
FUNCTIONS[np.lib.stride_tricks.sliding_window_view] = sliding_window_view
FUNCTIONS[np.diagonal] = diagonal
FUNCTIONS[np.diag] = diag
FUNCTIONS[np.trace] = trace
for _name in FFTS:
    FUNCTIONS[getattr(np.fft, _name)] = _fft(_name)
for _name in (*NUMPY_UPDATES, *NUMPY_SAME_SHAPE):
    FUNCTIONS[getattr(np, _name)] = _numpy_update(_name)


def handle_function(ctx, func, args, kwargs):
    if any(v is np._NoValue for v in (*args, *kwargs.values())):  # (numpy's "not given": `keepdims=np._NoValue`
        args, kwargs = _given(func, args, kwargs)  # passed on by a wrapper, or by jit(np.ptp), is no keepdims)
    if kwargs.get("out") is not None:
        return _into(ctx, func, args, kwargs)
    handler = FUNCTIONS.get(func)
    if handler is not None:
        try:
            result = handler(ctx, *args, **kwargs)
        except TypeError as e:
            if "argument" not in str(e):
                raise
            result = None  # a signature we do not model: run it eagerly
        if result is NONE:
            return None
        if result is not None:
            return result
    return eager_call(ctx, func, args, kwargs)


def _given(func, args: tuple, kwargs: dict) -> tuple:
    """(args, kwargs) of a call of numpy's `func` without those numpy's
    np._NoValue stands for as not given: the positional ones from the first
    of them on passed by their names (as numpy's own signature names them)."""
    first = next((k for k, a in enumerate(args) if a is np._NoValue), len(args))
    named = {}
    if first < len(args):
        try:
            params = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            return args, kwargs
        if first >= len(params) or any(p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                                       for p in params[first:len(args)]):
            return args, kwargs
        named = {p.name: a for p, a in zip(params[first:], args[first:])}
    return args[:first], {k: v for k, v in {**named, **kwargs}.items() if v is not np._NoValue}


# ----------------------------------------------------------------- methods

def _method_handler(name):
    def m(t, *args, **kwargs):
        return handle_function(t.ctx, getattr(np, name), (t,) + args, kwargs)
    return m


METHODS = {n: _method_handler(n) for n in (
    "sum", "mean", "max", "min", "prod", "var", "std", "any", "all", "argmax", "argmin",
    "swapaxes", "squeeze", "ravel", "clip", "dot", "take", "repeat", "cumsum", "cumprod", "argsort", "round",
    "diagonal", "trace")}
METHODS.update({
    "reshape": lambda t, *s, **kw: reshape(t.ctx, t, *s, **kw),
    "transpose": lambda t, *axes: transpose(t.ctx, t, *axes),
    "astype": lambda t, dtype, **kw: astype(t.ctx, t, dtype, **kw),
    # (a copy, always: writes into it never reach t)
    "flatten": lambda t, order="C": reshape(t.ctx, t.ctx.emit("astype", [t], {"dtype": t.dtype}), -1)
    if order == "C" else eager_call(t.ctx, np.ndarray.flatten, [t], {"order": order}),
    "copy": lambda t, order="C": t.ctx.emit("astype", [t], {"dtype": t.dtype}),
    # (x.view(): a new view of all of x, as x[...]; of another dtype or type, numpy's)
    "view": lambda t, dtype=None, type=None: getitem(t.ctx, t, Ellipsis) if dtype is None and type is None else None,
    "conj": _conjugate, "conjugate": _conjugate, "sort": _sort_in_place, "fill": _fill_with,
    "partition": _partition_in_place, "put": _put_method,
})


def _part(name: str):
    """z.real and z.imag: a complex array's parts, kept views of z (a write
    through one makes z the complex array of the new part and the other:
    jit/tracer.py write); a real array's .real is the array itself, its
    .imag numpy's."""
    def part(t):
        if t.dtype.kind != "c":
            if name == "real":
                return t
            return eager_call(t.ctx, np.imag, (t,), {}, "ndarray.imag")
        r = t.ctx.emit(name, [t], {}, track=False)
        r.view_of(t, (name, {}))
        return r
    return part


PROPERTIES = {
    "T": lambda t: transpose(t.ctx, t),
    "mT": lambda t: swapaxes(t.ctx, t, -1, -2),
    "real": _part("real"),
    "imag": _part("imag"),
}
FUNCTIONS[np.real] = lambda ctx, val: PROPERTIES["real"](val) if isinstance(val, Tracer) else None
FUNCTIONS[np.imag] = lambda ctx, val: PROPERTIES["imag"](val) if isinstance(val, Tracer) else None


def method(t: Tracer, name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in PROPERTIES:
        return PROPERTIES[name](t)
    attr = getattr(np.ndarray, name, None)

    def eager(*a, **kw):
        return eager_call(t.ctx, lambda x, *a2, **kw2: getattr(x, name)(*a2, **kw2), (t,) + a, kw, f"ndarray.{name}")
    if name in METHODS:
        def method_(*a, **kw):
            r = METHODS[name](t, *a, **kw)  # (None: a form it does not model, x.reshape(..., order="F"): numpy's)
            return eager(*a, **kw) if r is None and name not in _RETURN_NONE and attr is not None else r
        return method_
    if attr is None:
        raise AttributeError(f"'Tracer' (a traced numpy array) has no attribute {name!r}")
    if callable(attr):
        return eager
    raise Fallback(f"attribute .{name} of a traced array", user_location())


_RETURN_NONE = frozenset({"sort", "fill", "partition", "put"})  # (numpy's in-place methods: None is their result)

tracer.PROTOCOL.ufunc, tracer.PROTOCOL.function = handle_ufunc, handle_function
tracer.PROTOCOL.getitem, tracer.PROTOCOL.setitem = getitem, setitem
tracer.PROTOCOL.method, tracer.PROTOCOL.ufunc_into = method, ufunc_into
tracer.PROTOCOL.array_of = array_of

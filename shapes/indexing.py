"""Basic indexing and reshape over symbolic dims, with numpy's semantics.

Branches of numpy's clamping rules are decided on the hints and guarded, so
the normalized form is exact for every shape that passes the guards:
items are ("int", i) with 0 <= i < n, ("slice", start, step, length), or
("new",) for None.
"""
from __future__ import annotations

import sympy

from shapes.env import ShapeEnv


def normalize_index(env: ShapeEnv, shape: tuple, index, where: str):
    """-> (items, out_shape) for a basic index (ints, slices, None, Ellipsis)."""
    if not isinstance(index, tuple):
        index = (index,)
    n_real = sum(1 for i in index if i is not None and i is not Ellipsis)
    if n_real > len(shape):
        raise IndexError(
            f"too many indices for array: array is {len(shape)}-dimensional, but {n_real} were indexed")
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    expanded = []
    for i in index:
        if i is Ellipsis:
            expanded += [slice(None)] * (len(shape) - n_real)
        else:
            expanded.append(i)
    expanded += [slice(None)] * (len(shape) - sum(1 for i in expanded if i is not None))
    items, out, ax = [], [], 0
    for i in expanded:
        if i is None:
            items.append(("new",))
            out.append(1)
            continue
        n = shape[ax]
        if isinstance(i, slice):
            start, step, length = slice_params(env, n, i, f"{where} axis {ax}")
            items.append(("slice", start, step, length))
            out.append(length)
        else:
            items.append(("int", _int_index(env, n, i, f"{where} axis {ax}", ax)))
        ax += 1
    return tuple(items), tuple(env.simplify(d) for d in out)


def _int_index(env, n, i, reason, ax):
    i, n = env.simplify(i), env.simplify(n)
    if env.compare("<", i, 0, reason):
        if env.compare("<", i + n, 0, reason):
            raise IndexError(f"index {env.hint(i)} is out of bounds for axis {ax} with size {env.hint(n)}")
        return env.simplify(i + n)
    if env.compare(">=", i, n, reason):
        raise IndexError(f"index {env.hint(i)} is out of bounds for axis {ax} with size {env.hint(n)}")
    return i


def slice_params(env: ShapeEnv, n, s: slice, reason: str):
    """(start, step, length) of `s` applied to a dim of size n."""
    n = env.simplify(n)
    step = 1 if s.step is None else env.simplify(s.step)
    if isinstance(step, sympy.Basic):
        step = env.hint(step) if env.decide(sympy.Eq(step, env.hint(step), evaluate=False), reason) else step
    if step == 0:
        raise ValueError("slice step cannot be zero")
    if step > 0:
        start = 0 if s.start is None else _clamp(env, n, s.start, 0, n, reason)
        stop = n if s.stop is None else _clamp(env, n, s.stop, 0, n, reason)
        span = env.simplify(stop - start)
        if env.compare("<=", span, 0, reason):
            return start, step, 0
        length = span if step == 1 else env.simplify(sympy.floor((span + step - 1) / sympy.Integer(step)))
        return start, step, length
    start = n - 1 if s.start is None else _clamp(env, n, s.start, -1, n - 1, reason)
    stop = -1 if s.stop is None else _clamp(env, n, s.stop, -1, n - 1, reason)
    span = env.simplify(start - stop)
    if env.compare("<=", span, 0, reason):
        return 0, step, 0
    length = span if step == -1 else env.simplify(sympy.floor((span - step - 1) / sympy.Integer(-step)))
    return env.simplify(start), step, length


def _clamp(env, n, i, lo, hi, reason):
    i, n = env.simplify(i), env.simplify(n)
    if env.compare("<", i, 0, reason):
        i = env.simplify(i + n)
        if env.compare("<", i, lo, reason):
            return lo
        return i
    if env.compare(">", i, hi, reason):
        return env.simplify(hi)
    return i


def infer_reshape(env: ShapeEnv, in_shape: tuple, new_shape: tuple, where: str) -> tuple:
    """Resolve -1 and check the element count, symbolically."""
    new_shape = tuple(env.simplify(d) for d in new_shape)
    total = sympy.Integer(1)
    for d in in_shape:
        total *= d
    holes = [k for k, d in enumerate(new_shape) if isinstance(d, int) and d == -1]
    if len(holes) > 1:
        raise ValueError("can only specify one unknown dimension")
    known = sympy.Integer(1)
    for k, d in enumerate(new_shape):
        if k not in holes:
            if isinstance(d, int) and d < 0:
                raise ValueError(f"negative dimensions not allowed: {d}")
            known *= d
    hint_total, hint_known = env.hint(total), env.hint(known)
    if holes:
        if hint_known == 0 or hint_total % hint_known:
            raise ValueError(
                f"cannot reshape array of size {hint_total} into shape "
                f"{tuple(-1 if k in holes else env.hint(d) for k, d in enumerate(new_shape))}")
        q = sympy.cancel(total / known)
        num, den = sympy.fraction(q)
        if den != 1:
            env.decide(sympy.Eq(sympy.Mod(num, den), 0, evaluate=False), f"{where}: size divisible by {den}")
            q = sympy.floor(q)
        k = holes[0]
        return tuple(env.simplify(q) if j == k else d for j, d in enumerate(new_shape))
    if hint_total != hint_known:
        raise ValueError(f"cannot reshape array of size {hint_total} into shape "
                         f"{tuple(env.hint(d) for d in new_shape)}")
    if sympy.expand(total - known) != 0:
        num, den = sympy.fraction(sympy.cancel(total / known))
        if num != 0 and den != 0 and all(not env.symbols[x].data_dependent and (env.symbols[x].lo or 0) >= 1
                                         for x in (total * known).free_symbols):
            # (factors common to both sides are nonzero: s0*s3 == 768*s0 is s3 == 768, a replacement
            # where unify finds one, not a product the guards would carry and sympy prove slowly)
            env.unify(num, den, f"{where}: element count")
        else:
            env.decide(sympy.Eq(env.simplify(total), env.simplify(known), evaluate=False), f"{where}: element count")
        new_shape = tuple(env.simplify(d) for d in new_shape)
    return new_shape

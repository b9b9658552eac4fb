"""Nested tuples (named ones too), lists and dicts of leaves: flatten to a
list and a hashable tree description, and rebuild."""
from __future__ import annotations

import functools

LEAF = None  # the treedef of a single leaf


class Rows:
    """A list of the rows of one array: a list a compiled loop appended to
    (jit/tracer.py Stacked), returned.  Flattened, the array is its leaf;
    rebuilt, the list of the array's rows (each a view of one row, or of a
    1-D array its numpy scalars), or with `python`, of its Python numbers
    (`losses.append(float(loss))`)."""

    __slots__ = ("array", "python")

    def __init__(self, array, python: bool = False):
        self.array, self.python = array, python


def flatten(obj, leaves: list) -> object:
    """Append obj's leaves to `leaves`; return its treedef (hashable)."""
    t = type(obj)
    if t is tuple:  # (a call's arguments: most often leaves alone, flattened in one step)
        for x in obj:
            if type(x) in _NESTED or isinstance(x, tuple):
                break
        else:
            leaves.extend(obj)
            return flat_tuple(len(obj))
    if t is Rows:
        return (Rows, obj.python, (flatten(obj.array, leaves),))
    if t is tuple or t is list:
        return (t, tuple(flatten(x, leaves) for x in obj))
    if t is dict:
        keys = tuple(obj)
        return (dict, keys, tuple(flatten(obj[k], leaves) for k in keys))
    if isinstance(obj, tuple) and hasattr(t, "_fields"):  # (a namedtuple: its type kept)
        return (t, tuple(flatten(x, leaves) for x in obj))
    leaves.append(obj)
    return LEAF


_NESTED = frozenset({list, dict, Rows})  # (and tuples: what flatten() walks into)


def count_leaves(treedef) -> int:
    if treedef is LEAF:
        return 1
    return sum(count_leaves(d) for d in treedef[-1])


@functools.cache
def flat_tuple(n: int) -> tuple:
    """The treedef of a tuple of n leaves."""
    return (tuple, (LEAF,) * n)


def unflatten(treedef, leaves_iter):
    if treedef is LEAF:
        return next(leaves_iter)
    t = treedef[0]
    if t is dict:
        return {k: unflatten(d, leaves_iter) for k, d in zip(treedef[1], treedef[2])}
    if t is Rows:
        a = unflatten(treedef[2][0], leaves_iter)
        return a.tolist() if treedef[1] else list(a)
    items = [unflatten(d, leaves_iter) for d in treedef[1]]
    return tuple(items) if t is tuple else items if t is list else t(*items)


def leaf_paths(treedef, prefix: str) -> list[str]:
    """Readable names of the leaves: x, args[1], cfg['w']."""
    if treedef is LEAF:
        return [prefix]
    out = []
    if treedef[0] is dict:
        for k, d in zip(treedef[1], treedef[2]):
            out += leaf_paths(d, f"{prefix}[{k!r}]")
    elif treedef[0] is Rows:
        out += leaf_paths(treedef[2][0], prefix)
    else:
        for i, d in enumerate(treedef[1]):
            out += leaf_paths(d, f"{prefix}[{i}]")
    return out

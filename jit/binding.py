"""Binding a call to the jitted function's parameters: (args, kwargs) in,
one tuple in parameter order out (what the key and the trace flatten; an
argument named in static_argnames wrapped as Static, keyed by value); and
that tuple back to (args, kwargs), to run the function in numpy."""
from __future__ import annotations

import functools
import inspect
import types

import numpy as np

from jit import pytree


class Static:
    """An argument forced static by static_argnames: part of the key."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, o):
        return isinstance(o, Static) and type(o.value) is type(self.value) and o.value == self.value

    def __hash__(self):
        return hash((type(self.value), self.value))


class Parameters:
    """The parameters of a jitted function (`name` names it in errors)."""

    def __init__(self, fn, static_argnames: frozenset, name: str):
        self.signature = inspect.signature(fn)
        # (a partial's keywords are its signature's defaults, which the user may change after: read again then)
        self._partial = fn if isinstance(fn, functools.partial) else None
        self._keywords = dict(fn.keywords) if self._partial is not None else None
        self.static_argnames = static_argnames
        self.name = name
        params = list(self.signature.parameters.values())
        self.names = [p.name for p in params]
        unknown = sorted(set(static_argnames) - set(self.names))
        if unknown:  # (as dims= names one: a typo would leave the argument traced, silently)
            raise ValueError(f"{name}: static_argnames names {', '.join(map(repr, unknown))}, which "
                             f"{'is not a parameter' if len(unknown) == 1 else 'are not parameters'} "
                             f"(its parameters: {', '.join(self.names)})")
        self.count = len(params)
        # every parameter is passed by position and none is static: the hot path binds such calls itself
        self.positional = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) \
            and not static_argnames and self._partial is None
        # the trailing defaults a positional call may leave out
        defaults = tuple(p.default for p in params if p.default is not p.empty) if self.positional else ()
        if any(p.default is p.empty for p in params[self.count - len(defaults):]):
            defaults = ()
        self.defaults = defaults

    def bind(self, args, kwargs) -> tuple:
        if self._partial is not None and not _same_items(self._partial.keywords, self._keywords):
            self.__init__(self._partial, self.static_argnames, self.name)
        try:
            ba = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.name}(): {e}") from None
        ba.apply_defaults()
        out = []
        for name, p in self.signature.parameters.items():
            v = ba.arguments[name]
            if p.kind == p.VAR_POSITIONAL:
                out.append(tuple(v))
            elif p.kind == p.VAR_KEYWORD:
                out.append(dict(v))
            elif name in self.static_argnames:
                out.append(Static(v))
            else:
                out.append(v)
        return tuple(out)

    def unbind(self, bound) -> tuple[tuple, dict]:
        """The bound tuple back to the user's (args, kwargs)."""
        if self.positional:  # (no Static in it)
            return tuple(bound), {}
        args, kwargs = [], {}
        for (name, p), v in zip(self.signature.parameters.items(), bound):
            v = v.value if isinstance(v, Static) else v
            if p.kind == p.VAR_POSITIONAL:
                args.extend(v)
            elif p.kind == p.VAR_KEYWORD:
                kwargs.update(v)
            elif p.kind == p.KEYWORD_ONLY:
                kwargs[name] = v
            else:
                args.append(v)
        return tuple(args), kwargs

    def leaf_paths(self, treedef) -> list[str]:
        """Readable names of the bound tuple's leaves: x, args[1], cfg['w']."""
        out = []
        for name, sub in zip(self.names, treedef[1]):
            out += pytree.leaf_paths(sub, name)
        return out


def _same_items(a: dict, b: dict) -> bool:
    """Whether two dicts hold the same objects under the same keys (an array compared by identity)."""
    return len(a) == len(b) and all(k in b and v is b[k] for k, v in a.items())


def with_signature(fn):
    """fn, or for a ufunc, a builtin or a callable without a signature (whose
    defaults are not passable), a Python function that calls it with exactly
    the arguments given."""
    if not isinstance(fn, (np.ufunc, types.BuiltinFunctionType)) and _has_signature(fn):
        return fn

    def call(*args, **kwargs):
        return fn(*args, **kwargs)
    call.__name__ = getattr(fn, "__name__", "jitted")
    call.__qualname__ = call.__name__
    call.__doc__ = getattr(fn, "__doc__", None)
    return call


def _has_signature(fn) -> bool:
    try:
        inspect.signature(fn)
        return True
    except (TypeError, ValueError):
        return False

"""Integer-exact Python source for shape expressions (sizes, guards).

sympy is for compile time only: every guard and size expression becomes
Python source once, evaluated on the hot path without sympy.  Division only
appears inside floor/ceiling/Mod and prints as `//`, so results stay exact.

A symbol is never printed as its name: a user names dims (`dims=`), and a
name such as `lambda`, `min`, `sh` or `v0` would be a syntax error or take
the place of a name of the generated code.  It prints as `ident(symbol)`,
its name behind the prefix `d_`, which no other name in generated source
begins with.
"""
from __future__ import annotations

import sympy


def ident(sym) -> str:
    """The Python identifier of a dim symbol in generated source."""
    return "d_" + sym.name


def to_python(e) -> str:
    if isinstance(e, bool):
        return "True" if e else "False"
    if isinstance(e, int):
        return str(e)
    if e is sympy.true:
        return "True"
    if e is sympy.false:
        return "False"
    if isinstance(e, sympy.Integer):
        return str(int(e))
    if isinstance(e, sympy.Symbol):
        return ident(e)
    if isinstance(e, sympy.Add):
        return "(" + " + ".join(to_python(a) for a in e.args) + ")"
    if isinstance(e, sympy.Mul):
        num, den = sympy.fraction(e)
        if den != 1:
            raise ValueError(f"non-integer shape expression {e}")
        return "(" + " * ".join(to_python(a) for a in e.args) + ")"
    if isinstance(e, sympy.Pow):
        base, ex = e.args
        if ex.is_Integer and int(ex) > 0:
            return f"({to_python(base)} ** {int(ex)})"
        raise ValueError(f"non-integer shape expression {e}")
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        num, den = sympy.fraction(sympy.together(e.args[0]))
        n, d = to_python(sympy.expand(num)), to_python(sympy.expand(den))
        if isinstance(e, sympy.floor):
            return f"({n} // {d})"
        return f"(-((-{n}) // {d}))"
    if isinstance(e, sympy.Mod):
        return f"({to_python(e.args[0])} % {to_python(e.args[1])})"
    if isinstance(e, sympy.Max):
        return "max(" + ", ".join(to_python(a) for a in e.args) + ")"
    if isinstance(e, sympy.Min):
        return "min(" + ", ".join(to_python(a) for a in e.args) + ")"
    if isinstance(e, sympy.core.relational.Relational):
        return f"({to_python(e.lhs)} {e.rel_op} {to_python(e.rhs)})"
    if isinstance(e, sympy.And):
        return "(" + " and ".join(to_python(a) for a in e.args) + ")"
    if isinstance(e, sympy.Or):
        return "(" + " or ".join(to_python(a) for a in e.args) + ")"
    if isinstance(e, sympy.Not):
        return f"(not {to_python(e.args[0])})"
    raise ValueError(f"cannot print shape expression {e!r}")


def exprs_source(exprs, symbols) -> str:
    """One function of the symbol values returning the tuple of exprs, as
    source (a lambda, plain text; compile_source makes the function)."""
    args = ", ".join(map(ident, symbols))
    body = ", ".join(to_python(e) for e in exprs)
    return f"lambda {args}: ({body}{',' if len(exprs) == 1 else ''})"


def compile_source(source: str) -> "callable":
    return eval(compile(source, "<shape>", "eval"))
